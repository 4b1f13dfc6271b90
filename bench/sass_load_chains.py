#!/usr/bin/env python3
"""The global loads of one kernel's SASS in order, and which of them wait for
the one before: a load whose result an instruction reads before the next
load goes out leaves the warp stalled for a whole round trip, so loads in
that pattern run in series (session 31: every one-row GEMV issued its input
chunks so after its PDL wait, 2-4 round trips where one would do; the paged
decode looked up each row's page before the next).

  bench/sass_load_chains.py OBJECT|SASS_TEXT KERNEL_SUBSTRING [--from-wait]

OBJECT is run through cuobjdump -sass ($CUOBJDUMP, else /usr/local/cuda/bin/
cuobjdump; here, PyPI's nvidia-cuda-cuobjdump wheel); a .sass file is read as
is. KERNEL_SUBSTRING picks the function (a piece of its mangled name; the
first match). --from-wait starts at the PDL wait (ACQBULK). Each global load
(LDG, and the cp.async LDGSTS that copies from one) prints with its offset;
"waits" marks a load whose result is read before the next load: with another
load after it, the two go out one round trip apart. The last line counts
the loads and the serial pairs.
"""
import os
import re
import signal
import subprocess
import sys

LOAD = re.compile(r"\b(LDG|LDGSTS)\b")
INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
REG = re.compile(r"\bR(\d+)\b")


def sass_text(path):
    if path.endswith(".sass") or path.endswith(".txt"):
        return open(path).read()
    tool = os.environ.get("CUOBJDUMP", "/usr/local/cuda/bin/cuobjdump")
    return subprocess.run([tool, "-sass", path], capture_output=True, text=True, check=True).stdout


def function(text, wanted):
    for body in re.split(r"\n\s*Function : ", text)[1:]:
        name = body.split("\n", 1)[0].strip()
        if wanted in name:
            return name, [(m.group(1), m.group(2)) for m in INSN.finditer(body)]
    raise SystemExit(f"sass_load_chains: no function matching '{wanted}'")


def unpredicated(insn):
    return insn.split(None, 1)[1] if insn.startswith("@") else insn


def opcode(insn):
    return unpredicated(insn).split()[0]


def destination(insn):
    """The first register an LDG writes (LDGSTS writes shared memory: none)."""
    if not LOAD.search(opcode(insn)) or opcode(insn).startswith("LDGSTS"):
        return None
    m = REG.search(unpredicated(insn).split(None, 1)[1])
    return m.group(1) if m else None


def reads(insn, reg):
    """Whether insn reads register reg (a source operand, not its destination)."""
    parts = unpredicated(insn).split(None, 1)
    if len(parts) < 2:
        return False
    operands = [o.strip() for o in parts[1].split(",")]
    # The first operand is the destination for most instructions; stores and
    # copies (ST*, LDGSTS, RED, ATOM) read every operand.
    sources = operands if re.match(r"(ST|LDGSTS|RED|ATOM)", parts[0]) else operands[1:]
    return any(re.search(rf"\bR{reg}\b", o) for o in sources)


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # piped into head: stop quietly
    args = [a for a in sys.argv[1:] if a != "--from-wait"]
    if len(args) != 2:
        raise SystemExit(__doc__)
    name, insns = function(sass_text(args[0]), args[1])
    if "--from-wait" in sys.argv:
        start = next((i for i, (_, t) in enumerate(insns) if "ACQBULK" in t), 0)
        insns = insns[start:]
    loads = [i for i, (_, t) in enumerate(insns) if LOAD.search(opcode(t))]
    print(name)
    serial = 0
    for n, i in enumerate(loads):
        offset, text = insns[i]
        reg = destination(text)
        nxt = loads[n + 1] if n + 1 < len(loads) else len(insns)
        # Up to and with the next load: one whose address is this load's
        # result (a page-table entry, a pointer) waits for it as well.
        used = reg is not None and any(reads(t, reg) for _, t in insns[i + 1:nxt + 1])
        waits = used and n + 1 < len(loads)
        serial += waits
        print(f"  {offset}  {text}{'   <- waits (next load one round trip later)' if waits else ''}")
    print(f"{len(loads)} global loads, {serial} waited for before the next load")


if __name__ == "__main__":
    main()
