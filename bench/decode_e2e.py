#!/usr/bin/env python3
"""Batch-1 decode ms/token of a txc artifact (tx-run --device cuda) and of HF
transformers (eager, bf16) on the same model shape, in the same run.

  decode_e2e.py TX_RUN ARTIFACT SHAPE_DIR OUT_JSON [--prompt-len 128] [--new 128]

txc: tx-run wall time for prompt + `new` tokens minus prompt + 1 token,
median of 3, divided by new - 1: the steady decode cost including the
engine's host work (scheduling, logits copy, CPU sampling). It also pays
weight generation at load in both runs, which the difference cancels.
HF: model.generate with the default dynamic cache, timed with CUDA events
after a warm-up, same subtraction.
"""
import argparse
import json
import random
import statistics
import subprocess
import sys
import time


def txc_time(tx_run, artifact, prompt, new):
    cmd = [tx_run, artifact, "--device", "cuda", "--prompt-ids", ",".join(map(str, prompt)),
           "--max-new-tokens", str(new), "--ignore-eos", "--json"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"tx-run failed: {out.stderr.strip()}")
    return time.perf_counter() - t0


def hf_ms_per_token(shape_dir, prompt, new):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.from_pretrained(shape_dir)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    ids = torch.tensor([prompt], device="cuda")

    def run(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    with torch.no_grad():
        run(4)
        long = statistics.median(run(new) for _ in range(3))
        short = statistics.median(run(1) for _ in range(3))
    return (long - short) / (new - 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tx_run")
    ap.add_argument("artifact")
    ap.add_argument("shape_dir")
    ap.add_argument("out_json")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    a = ap.parse_args()
    random.seed(0)
    prompt = [random.randrange(1000, 100000) for _ in range(a.prompt_len)]
    long = statistics.median(txc_time(a.tx_run, a.artifact, prompt, a.new) for _ in range(3))
    short = statistics.median(txc_time(a.tx_run, a.artifact, prompt, 1) for _ in range(3))
    txc_ms = (long - short) * 1e3 / (a.new - 1)
    hf_ms = hf_ms_per_token(a.shape_dir, prompt, a.new)
    result = {"what": "batch-1 decode ms/token, 128-token prompt", "txc_tx_run_cuda_ms": txc_ms,
              "hf_eager_bf16_ms": hf_ms, "prompt_len": a.prompt_len, "new_tokens": a.new}
    print(json.dumps(result, indent=1))
    json.dump(result, open(a.out_json, "w"), indent=1)


if __name__ == "__main__":
    main()
