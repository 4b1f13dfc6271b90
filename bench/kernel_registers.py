#!/usr/bin/env python3
"""Registers, spills and blocks an SM of the decode step's hot kernels, from
ptxas -v, so that a change that costs residency shows before a device call.

The b1 decode step lives on kernels resident before their predecessor exits
(programmatic dependent launch): a GEMV block that no longer fits beside the
blocks before it starts late, and its weights go out after the wait instead
of before it. Device run 89 (bench/RUNLOG.md) lost 0.015 ms on Qwen3-0.6B to
two changes that each removed an L2 round trip on paper; one of them raised
the GEMV's registers 56 -> 62 and 72 -> 77, a block an SM fewer.

  bench/kernel_registers.py [--nvcc PATH] [--filter TEXT] [--against REV]

Compiles runtime/backends/cuda/Gemv.cu and the decode attention's tensor-core
kernels at Qwen3's and Llama's shapes (page 16, no window or soft-cap; the
4-warp and the wide 16-warp CTA), at head_dim 64 and at group 8, for sm_90a, and prints per kernel its
registers, spill stores, how many of its blocks fit an SM by registers
alone, and its code size (the cubin's .text section): a kernel run once a
layer on an SM that ran other kernels since fetches its instructions cold,
each miss an L2 round trip under the GEMVs' weight streams (session 22, runs
127-130: the wide CTA's ~100 KB). --against REV prints REV's figures beside
the working tree's (its runtime/ and include/ from `git archive`) and marks
each kernel whose registers, spills or code grew: run it on every kernel
branch before it goes to the GPU (session 53: a branch whose second inlined
loadTile took the d128 decode kernel from 121 to 168 registers with spills
was bundled for an A/B unnoticed).
"""
import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REGISTERS_PER_SM = 65536

# The decode attention as the executor instantiates it for the two model
# shapes (bf16, head_dim 128, GQA group 2 and 4, page 16): 4 warps and wide;
# then head_dim 64 (groups 4 and 8) and group 8 at head_dim 128, where ptxas
# has aimed at 64-72 registers and spilled in the main loop once the split
# merge's tail grew (session 42: seen only in the build log's warnings).
DECODE_INSTANCES = """#include "attention/decode_mma.cuh"
using namespace txc::kernels;
#define DECODE(DIM, GROUP, WARPS) \\
  template __global__ void txc::kernels::pagedDecodeMmaKernel< \\
      DecodeMmaTraits<__nv_bfloat16, DIM, GROUP, 16, WARPS>, AttentionVariant<false, false, false>>(const __grid_constant__ DecodeParams);
DECODE(128, 2, kDecodeMmaWarps)
DECODE(128, 4, kDecodeMmaWarps)
DECODE(128, 2, kDecodeWideWarps)
DECODE(128, 4, kDecodeWideWarps)
DECODE(128, 8, kDecodeMmaWarps)
DECODE(64, 4, kDecodeMmaWarps)
DECODE(64, 8, kDecodeMmaWarps)
DECODE(64, 4, kDecodeWideWarps)
"""


def text_sizes(cubin):
    """{mangled kernel: bytes of its .text.<kernel> section} of an ELF64 cubin."""
    with open(cubin, "rb") as f:
        elf = f.read()
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    def section(i):  # (name offset, file offset, size)
        base = shoff + i * shentsize
        name, = struct.unpack_from("<I", elf, base)
        offset, size = struct.unpack_from("<QQ", elf, base + 0x18)
        return name, offset, size
    _, strtab, _ = section(shstrndx)
    sizes = {}
    for i in range(shnum):
        name_offset, _, size = section(i)
        end = elf.index(b"\0", strtab + name_offset)
        name = elf[strtab + name_offset:end].decode()
        if name.startswith(".text."):
            sizes[name[len(".text."):]] = size
    return sizes


def ptxas_report(nvcc, source, root=ROOT):
    """[(kernel, registers, spill store bytes, code bytes)] of every entry in
    `source`, with the headers of the tree at `root`."""
    # Compiled as the build compiles it (-c), the cubin kept for its sections.
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [nvcc, "-std=c++17", "-O3", "-DNDEBUG", "-gencode=arch=compute_90a,code=sm_90a",
               f"-I{root}", f"-I{root}/include", f"-I{root}/runtime/kernels", "-Xptxas", "-v",
               "--keep", "--keep-dir", tmp, "-c", source, "-o", os.path.join(tmp, "kernels.o")]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        if out.returncode != 0:
            sys.exit(f"kernel_registers: {source} did not compile:\n{out.stderr[-3000:]}")
        sizes = {}
        for name in os.listdir(tmp):
            if name.endswith(".cubin"):
                sizes.update(text_sizes(os.path.join(tmp, name)))
    rows, kernel, spill = [], None, 0
    for line in out.stderr.splitlines():
        if m := re.search(r"Compiling entry function '([^']+)'", line):
            kernel = m.group(1)
        elif m := re.search(r"(\d+) bytes spill stores", line):
            spill = int(m.group(1))
        elif m := re.search(r"Used (\d+) registers", line):
            rows.append((kernel, int(m.group(1)), spill, sizes.get(kernel, 0)))
    return rows


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    return out.stdout.splitlines() if out.returncode == 0 else names


def threads_of(name):
    """Threads a block from the kernel's template arguments (GEMV: warps
    a block is the 4th argument; decode: the traits' 5th)."""
    if m := re.search(r"gemvKernel<[^,]+, [^,]+, \d+, (\d+), \d+[,>]", name):
        return 32 * int(m.group(1))
    if m := re.search(r"DecodeMmaTraits<[^,]+, \d+, \d+, \d+, (\d+)>", name):
        return 32 * int(m.group(1))
    return None


def tree_report(nvcc, root):
    """{kernel: (registers, spill bytes, code bytes)} of the GEMVs and the
    decode instances, from the sources under `root`."""
    rows = ptxas_report(nvcc, os.path.join(root, "runtime/backends/cuda/Gemv.cu"), root)
    with tempfile.NamedTemporaryFile("w", suffix=".cu", delete=False) as f:
        f.write(DECODE_INSTANCES)
    try:
        rows += ptxas_report(nvcc, f.name, root)
    finally:
        os.unlink(f.name)
    # Keyed by the demangled name: an anonymous namespace's mangled name
    # carries a hash of the source's path (the GEMVs'), which differs
    # between this tree and an archived one.
    names = demangle([kernel for kernel, *_ in rows])
    return {name: tuple(figures) for name, (_, *figures) in zip(names, rows)}


def archived_tree(rev, into):
    """REV's runtime/ and include/ unpacked under `into` (git archive)."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "runtime", "include"], capture_output=True)
    if archive.returncode != 0:
        sys.exit(f"kernel_registers: git archive {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nvcc", default="/usr/local/cuda/bin/nvcc")
    ap.add_argument("--filter", default="", help="only kernels whose demangled name contains TEXT (any case)")
    ap.add_argument("--against", metavar="REV", help="a commit to compare with (e.g. main)")
    args = ap.parse_args()
    here = tree_report(args.nvcc, ROOT)
    base = {}
    if args.against:
        with tempfile.TemporaryDirectory() as tmp:
            archived_tree(args.against, tmp)
            base = tree_report(args.nvcc, tmp)
    before = f" {args.against + ':':>22}" if args.against else ""
    print(f"{'registers':>9} {'spill B':>7} {'blocks/SM':>9} {'code KB':>7}{before}  kernel")
    grew = 0
    for name in sorted(here):
        if args.filter.lower() not in name.lower():
            continue
        registers, spill, code = here[name]
        threads = threads_of(name)
        # Registers are allocated 8 a thread at a time (256 a warp).
        blocks = REGISTERS_PER_SM // (threads * ((registers + 7) // 8 * 8)) if threads else "?"
        short = re.sub(r"\(txc::kernels::DecodeParams\)|\(txc::cuda::GemvArgs, int\)", "", name)
        short = re.sub(r"txc::(cuda::\(anonymous namespace\)|kernels)::", "", short)
        then = ""
        if args.against:
            if name in base:
                r0, s0, c0 = base[name]
                # Code a few percent larger is noise of layout; registers and spills are not.
                worse = registers > r0 or spill > s0 or code > c0 * 1.05
                grew += worse
                then = f" {r0:>4} {s0:>4} {c0 / 1024:>7.1f} {'GREW' if worse else '':>4}"
            else:
                then = f" {'(not in ' + args.against + ')':>22}"
        print(f"{registers:>9} {spill:>7} {blocks:>9} {code / 1024:>7.1f}{then}  {short}")
    if args.against:
        print(f"{grew} kernel(s) with more registers, spills or >5% more code than {args.against}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
