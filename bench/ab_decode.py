#!/usr/bin/env python3
"""Interleaved A/B timing of tx-run modes on one artifact.

One tx-run per mode and round, the modes taking turns round after round, so
that a drift of the GPU's clocks or temperature falls on every mode alike
(run-to-run spread of a single Llama-3-8B run is about +-0.03 ms/token). Each
run prints its median decode step (GPU stream; with --wall the wall time,
the token interval with the host's part: what a mode that changes the host's
side, like tx-run's decode lookahead, moves); this prints, per mode, the
median over rounds and its difference from the first mode.

  bench/ab_decode.py TX_RUN ARTIFACT [--batch B] [--new N] [--rounds R] [--trace] [--wall]
      --mode NAME[=FLAGS] ... [--modes-file FILE] [-- EXTRA tx-run FLAGS for every run]

With --trace, one more run per mode with tx-run --trace-step prints, per
kind of kernel, what it adds to the last decode step (its share, the wait
after its predecessor, how early it was resident, its time after the wait).
--by-layer KERNEL adds, for the kernels whose label contains KERNEL, each
launch's time after its wait in launch order (a state that flips within a
step shows there, not in the means).

A mode's FLAGS may begin with "--tx-run PATH": that mode runs another
tx-run binary (PATH relative to TX_RUN's directory unless absolute), e.g. the
one of an earlier commit carried beside the bundle, so that an A/B across
commits takes turns in one call like any other. Then (or first) "--artifact
PATH" runs another artifact (relative to ARTIFACT's directory unless
absolute), e.g. one compiled with other txc flags.

Example: bench/ab_decode.py tx-run qwen3.txm --mode default --mode fold=--rope-in-attention \\
             -- --random-weights 1
         bench/ab_decode.py gpu/tx-run qwen3.txm --mode new --mode "base=--tx-run tx-run-base"
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys

STEP = re.compile(r"(\d+) decode steps, median ([0-9.]+) ms wall, ([0-9.]+) ms GPU stream")
SETUP = re.compile(r"tx-run timing: decode attention: (.*)")
# A row of --trace-step's per-kernel listing: index, label, first start,
# last start, wait release, exit (us), then optional latest-over-blocks points.
KERNEL_ROW = re.compile(r"\s*\d+ (?P<label>.+?)\s+(?P<start>-?[\d.]+|nan)\s+(?P<last>-?[\d.]+|nan)"
                        r"\s+(?P<wait>-?[\d.]+|nan)\s+(?P<exit>-?[\d.]+|nan)(\s+\[.*\])?\s*$")


def binary_and_flags(args, flags):
    """The tx-run, the artifact and the flags of a mode: "--tx-run PATH"
    first in a mode's flags names another binary, "--artifact PATH" (first,
    or after it) another artifact."""
    def relative(path, to):
        return path if os.path.isabs(path) else os.path.join(os.path.dirname(to), path)
    binary, artifact = args.tx_run, args.artifact
    for option in ("--tx-run", "--artifact"):
        if flags[:1] == [option]:
            if len(flags) < 2:
                sys.exit(f"ab_decode: {option} in a mode needs a PATH")
            if option == "--tx-run":
                binary = relative(flags[1], args.tx_run)
            else:
                artifact = relative(flags[1], args.artifact)
            flags = flags[2:]
    return binary, artifact, flags


def run_tx(args, flags, extra):
    rng = random.Random(0)
    prompt = ",".join(str(rng.randrange(1000, 30000)) for _ in range(args.prompt))
    binary, artifact, flags = binary_and_flags(args, flags)
    cmd = [binary, artifact, "--device", "cuda", "--max-new-tokens", str(args.new),
           "--ignore-eos", "--timing"] + extra + flags
    for _ in range(args.batch):
        cmd += ["--prompt-ids", prompt]
    return subprocess.run(cmd, capture_output=True, text=True)


def trace_summary(args, name, flags, extra):
    """The per-kind lines of tx-run --trace-step's output (its whole output
    goes to --trace-dir when given). A failed run is reported, not fatal: a
    device call should bring back the other modes' figures."""
    out = run_tx(args, flags + ["--trace-step"], extra)
    if args.trace_dir:
        os.makedirs(args.trace_dir, exist_ok=True)
        with open(os.path.join(args.trace_dir, f"{name}.log"), "w") as f:
            f.write(out.stderr)
    if out.returncode != 0:
        return [f"FAILED ({out.returncode}): {out.stderr.strip()[-2000:]}"]
    lines = []
    listing = False
    after_wait = {kind: [] for kind in args.by_layer}
    for line in out.stderr.splitlines():
        if line.strip().startswith("#"):
            listing = True  # the per-kernel listing follows the summary
            continue
        if listing:
            m = KERNEL_ROW.match(line)
            if m:
                for kind in args.by_layer:
                    if kind in m.group("label"):
                        after_wait[kind].append(float(m.group("exit")) - float(m.group("wait")))
        elif lines or line.startswith("decode step trace"):
            lines.append(line)
    # A kernel's time after its wait, layer by layer: a state that flips
    # within a step (device run 63: an SM's carveout) shows here, not in
    # the means.
    for kind, values in after_wait.items():
        lines.append(f"{kind} after its wait, us by launch: " + " ".join(f"{v:.1f}" for v in values))
    return lines


def decode_ms(args, name, flags, extra):
    """The run's median GPU-stream decode step and its attention set-up, or
    (None, why) when the run failed; each run is logged as it ends, so a
    device call cut short still shows what ran."""
    out = run_tx(args, flags, extra)
    m = STEP.search(out.stderr)
    if out.returncode != 0 or not m:
        why = f"tx-run {' '.join(flags)} failed ({out.returncode}): {out.stderr.strip()[-2000:]}"
        print(f"ab_decode: {name}: {why}", file=sys.stderr, flush=True)
        return None, why
    wall, gpu = float(m.group(2)), float(m.group(3))
    print(f"ab_decode: {name} {gpu:.3f} ms GPU, {wall:.3f} ms wall", file=sys.stderr, flush=True)
    setup = SETUP.search(out.stderr)
    return (wall if args.wall else gpu), setup.group(1) if setup else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tx_run")
    ap.add_argument("artifact")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=128, help="prompt tokens per sequence")
    ap.add_argument("--new", type=int, default=64, help="new tokens per sequence")
    ap.add_argument("--wall", action="store_true",
                    help="compare the median decode step's wall time (the token interval, "
                         "host included) instead of its GPU stream time")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trace", action="store_true", help="also print each mode's step trace summary")
    ap.add_argument("--trace-dir", help="with --trace, keep each mode's whole trace output in DIR/NAME.log")
    ap.add_argument("--by-layer", action="append", default=[], metavar="KERNEL",
                    help="with --trace, also each launch's time after its wait of the kernels whose label "
                         "contains KERNEL (e.g. '4096x14336'), in launch order")
    ap.add_argument("--mode", action="append", default=[], help="NAME or NAME=FLAGS (space-separated)")
    ap.add_argument("--modes-file", help="more modes, one NAME or NAME=FLAGS a line (# comments)")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    specs = list(args.mode)
    if args.modes_file:
        with open(args.modes_file) as f:
            specs += [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
    if not specs:
        ap.error("give at least one --mode or a --modes-file")
    modes = []
    for spec in specs:
        name, _, flags = spec.partition("=")
        modes.append((name, flags.split()))
    times = {name: [] for name, _ in modes}
    setups = {}  # the decode attention set-up each mode ran (the last round's)
    for _ in range(args.rounds):
        for name, flags in modes:
            ms, setups[name] = decode_ms(args, name, flags, extra)
            if ms is not None:
                times[name].append(ms)
    base_times = times[modes[0][0]]
    base = statistics.median(base_times) if base_times else None
    label = f"{args.artifact} b{args.batch}"
    failed = False
    for name, flags in modes:
        if not times[name]:
            failed = True
            print(f"ab {label} {name:<24} FAILED: {setups[name]}  [{' '.join(flags)}]")
            continue
        med = statistics.median(times[name])
        diff = f"{med - base:+.3f}" if base is not None else "no baseline"
        runs = " ".join(f"{t:.3f}" for t in times[name])
        print(f"ab {label} {name:<24} median {med:.3f} ms ({diff}) runs {runs}  [{' '.join(flags)}]",
              flush=True)
        if len(times[name]) < args.rounds:
            failed = True
            print(f"   {name}: {args.rounds - len(times[name])} run(s) failed (see the log above)")
            continue
        if setups[name]:
            print(f"   {name}: decode attention {setups[name]}")
    if args.trace:
        for name, flags in modes:
            print(f"trace {label} {name} [{' '.join(flags)}]")
            lines = trace_summary(args, name, flags, extra)
            failed |= not lines or lines[0].startswith("FAILED")
            for line in lines:
                print("   " + line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
