#!/usr/bin/env python3
"""Stands in for tx-run in ab-decode.test and device-call.test: prints the
timing line that bench/ab_decode.py parses, a step time that depends on the
flags (so modes differ), and with --trace-step a trace summary in tx-run's
format. With --json --return-logits, one JSON line a --prompt-ids request:
greedy tokens and their logits, made from the prompt, every logit moved by
the value of --fake-logit-shift (so compare_modes.py can see a mode differ)."""
import json
import sys

args = sys.argv[1:]
if "--fail-here" in args:
    sys.stderr.write("fake-tx-run: asked to fail\n")
    sys.exit(3)
# Bound weights (--weights DIR) read 0.3 ms slower than random ones, so a
# test sees which a run was given.
ms = 4.0 + 0.1 * args.count("--no-decode-single-kv-stage") + (0.3 if "--weights" in args else 0.0)
sys.stderr.write(f"tx-run timing: 63 decode steps, median {ms + 0.1:.3f} ms wall, {ms:.3f} ms GPU stream; "
                 "1 prefill steps, median 1.000 ms wall, 1.000 ms GPU stream; whole run 300.0 ms for 64 tokens\n")
sys.stderr.write("tx-run timing: decode attention: rope folded in, global-memory merge, 16-token chunks\n")
if "--trace-step" in args:
    sys.stderr.write("decode step trace: 2 kernels; per kind, means in us against the kernel before:\n"
                     "  kernel  count share wait early after\n"
                     "  txk.attention / decode attention  1  6.00  0.50  0.00  5.50\n"
                     "  (share: ...; shares sum to 6.0 us)\n"
                     "     # kernel start last-start wait exit\n"
                     "     0 txk.gemm 6144x4096 / gemv  0.00  1.00  0.50  10.00\n")
if "--json" in args and "--return-logits" in args:
    shift = float(args[args.index("--fake-logit-shift") + 1]) if "--fake-logit-shift" in args else 0.0
    steps = int(args[args.index("--max-new-tokens") + 1]) if "--max-new-tokens" in args else 16
    prompts = [args[i + 1] for i, a in enumerate(args) if a == "--prompt-ids"]
    for request, prompt in enumerate(prompts):
        seed = sum(int(t) for t in prompt.split(","))
        logits = [[((seed + step * 7 + v * 13) % 17) / 4.0 + shift for v in range(8)] for step in range(steps)]
        tokens = [row.index(max(row)) for row in logits]
        print(json.dumps({"request": request, "prompt_ids": [int(t) for t in prompt.split(",")],
                          "output_ids": tokens, "logits": logits}))
