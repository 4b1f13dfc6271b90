#!/usr/bin/env python3
"""Compare a compiled artifact, run by tx-run, with Hugging Face goldens.

golden.json holds, per prompt, HF's greedy tokens, each step's logits
(fp32, eager attention) and the top-1 margin of each step. A step's token
must match unless its golden margin is within 2 * tolerance (a near-tie,
where a logit error within the tolerance may legitimately flip the
choice); after such a flip the two sequences diverge and later steps are
not compared. Logits of the compared steps must lie within the tolerance.

  check_goldens.py TX_RUN ARTIFACT GOLDEN --atol A [--batched] [--device cuda]

--batched submits every prompt in one tx-run call, so the engine batches
them; without it each prompt runs alone.
"""
import argparse
import json
import subprocess
import sys


def run(tx_run, artifact, prompts, steps, extra, device="cpu"):
    cmd = [tx_run, artifact, "--device", device, "--max-new-tokens", str(steps),
           "--ignore-eos", "--json", "--return-logits"] + extra
    for p in prompts:
        cmd += ["--prompt-ids", ",".join(map(str, p))]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"tx-run failed ({out.returncode}): {out.stderr.strip()}")
    results = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    results.sort(key=lambda r: r["request"])
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tx_run")
    ap.add_argument("artifact")
    ap.add_argument("golden")
    ap.add_argument("--atol", type=float, required=True)
    ap.add_argument("--batched", action="store_true")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="tx-run backend (default cpu)")
    ap.add_argument("--extra", default="", help="more tx-run flags, space separated")
    args = ap.parse_args()

    cases = json.load(open(args.golden))["cases"]
    steps = max(len(c["output_ids"]) for c in cases)
    extra = args.extra.split()
    if args.batched:
        results = run(args.tx_run, args.artifact, [c["prompt_ids"] for c in cases], steps, extra,
                      args.device)
    else:
        results = [run(args.tx_run, args.artifact, [c["prompt_ids"]], steps, extra, args.device)[0]
                   for c in cases]

    failures, compared, skipped, worst = [], 0, 0, 0.0
    for n, (case, got) in enumerate(zip(cases, results)):
        for i, want in enumerate(case["output_ids"]):
            diff = max(abs(a - b) for a, b in zip(case["step_logits"][i], got["logits"][i]))
            near_tie = case["top1_margin"][i] <= 2 * args.atol
            if got["output_ids"][i] != want:
                if near_tie:
                    skipped += len(case["output_ids"]) - i
                    break
                failures.append(f"case {n} step {i}: token {got['output_ids'][i]} != HF {want} "
                                f"(margin {case['top1_margin'][i]:.4g}, logit diff {diff:.3g})")
                break
            compared += 1
            worst = max(worst, diff)
            if diff > args.atol:
                failures.append(f"case {n} step {i}: logits differ by {diff:.3g} > {args.atol}")
    print(f"{args.artifact}: {compared} steps compared, {skipped} skipped after near-ties, "
          f"max |logit diff| {worst:.3g} (atol {args.atol})")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures or compared == 0 else 0)


if __name__ == "__main__":
    main()
