#!/usr/bin/env python3
"""Run one artifact through tx-run twice, with and without some flags, and
compare: the CUDA backend's optional modes must not change what a model
computes beyond a stated tolerance.

  compare_modes.py TX_RUN ARTIFACT --flags="--no-attention-pdl" --atol 0 [--batch 4]
      [--sampled | --greedy-tokens] [-- extra tx-run args, e.g. --random-weights 1]

Without --sampled: greedy, --return-logits; the logits of every generated
token must agree within --atol and the tokens must agree up to the first
near-tie (a step whose top-2 gap in the reference run is within 2 * atol).
With --sampled: top-k/top-p sampling with a fixed seed and no logits (so a
device sampler is used when the flags ask for one); the tokens must be equal.
With --greedy-tokens: greedy without logits (the argmax on the device, the
path the decode lookahead takes); the tokens must be equal.
Prompts are random ids (seed 0), --batch of them in one call.
"""
import argparse
import json
import random
import subprocess
import sys


def run(args, flags, extra):
    rng = random.Random(0)
    cmd = [args.tx_run, args.artifact, "--device", args.device, "--max-new-tokens", str(args.new),
           "--ignore-eos", "--json"] + flags + extra
    if args.sampled:
        cmd += ["--temperature", "0.8", "--top-k", "40", "--top-p", "0.9", "--seed", "11"]
    elif not args.greedy_tokens:
        cmd += ["--return-logits"]
    for _ in range(args.batch):
        cmd += ["--prompt-ids", ",".join(str(rng.randrange(args.vocab)) for _ in range(args.prompt))]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"tx-run {' '.join(flags)} failed ({out.returncode}): {out.stderr.strip()}")
    results = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return sorted(results, key=lambda r: r["request"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tx_run")
    ap.add_argument("artifact")
    ap.add_argument("--flags", required=True, help="tx-run flags of the mode under test")
    ap.add_argument("--atol", type=float, default=0.0)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new", type=int, default=16)
    ap.add_argument("--sampled", action="store_true")
    ap.add_argument("--greedy-tokens", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--vocab", type=int, default=20000, help="prompt ids are drawn below this")
    # Everything after "--" goes to both tx-run calls untouched (argparse
    # would bind a trailing positional list before it sees the "--").
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    reference = run(args, [], extra)
    mode = run(args, args.flags.split(), extra)
    worst, failures, compared = 0.0, 0, 0
    for ref, got in zip(reference, mode):
        if args.sampled or args.greedy_tokens:
            compared += len(ref["output_ids"])
            if ref["output_ids"] != got["output_ids"]:
                failures += 1
                print(f"request {ref['request']}: tokens {got['output_ids']} != {ref['output_ids']}")
            continue
        for step, (a, b) in enumerate(zip(ref["logits"], got["logits"])):
            compared += 1
            worst = max(worst, max(abs(x - y) for x, y in zip(a, b)))
            if ref["output_ids"][step] != got["output_ids"][step]:
                top = sorted(a, reverse=True)
                if top[0] - top[1] > 2 * args.atol:
                    failures += 1
                    print(f"request {ref['request']} step {step}: token differs, gap {top[0] - top[1]:.4g}")
                break  # the sequences diverge from here
    ok = failures == 0 and worst <= args.atol
    tokens_only = args.sampled or args.greedy_tokens
    print(f"{args.artifact} {args.flags}: {compared} {'tokens' if tokens_only else 'steps'} compared, "
          f"max |logit diff| {worst:.3g} (atol {args.atol:g}) -> {'PASS' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
