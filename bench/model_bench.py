#!/usr/bin/env python3
"""Whole-model benchmark and HF parity on real shapes: txc (tx-run) against HF transformers
eager and HF static cache + torch.compile, in one run (issue 7, parts 3 and 4).

For every model (a shape name from make_shape_checkpoint.py, or a directory with config.json):

1. HF-made weights. Builds the HF model from the shape's config with random weights
   (`AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)` under `torch.device(dev)`,
   torch seed fixed; HF's own init, normal std 0.02, norms 1) and `save_pretrained`s it to
   WORK_DIR/NAME-hf (safetensors). The artifact was compiled on the development machine from
   the same config with `txc compile --no-weights`; tx-run binds the saved weights with
   `--weights WORK_DIR/NAME-hf` (manifest names, dtype and shape are checked at load; fused
   QKV and gate/up are assembled from the checkpoint's slices).
2. Parity. One 128-token prompt: HF forward (bf16, logits of the last position cast to fp32),
   the same forward in fp32 (a float copy of the model; the exact reference), HF greedy
   `generate` of --parity-new tokens with its raw per-step logits, and
   `tx-run --return-logits --json` (the fp32 logits row each generated token was chosen from;
   row 0 is the last prompt position). Rows are compared up to the first token where the two
   greedy sequences differ (after it the prefixes differ). At that token the HF top-2 gap is
   checked against 2 x the largest |dlogit| seen: smaller means a near-tie, where an error
   within tolerance may legitimately flip the choice (random-weight models have small top-2
   gaps, so this happens early). To compare every row anyway, HF also runs one full forward
   (no cache) on the prompt + txc's own tokens: row i then has the same prefix in both.
   --return-logits makes tx-run copy the logits and sample on the host; the timing runs
   below sample greedily on the GPU instead, so their tokens are checked against the parity
   run's too (batch-1, and request 0 of every batch, which is the same prompt): recorded,
   not a pass criterion, since different batch sizes take different GEMM kernels and may
   flip near-ties.

   Tolerance (bf16): tol = max(0.15, 2 * max|HF bf16 - HF fp32|) on the logits. Both txc and
   HF compute in bf16 (8-bit mantissa, unit roundoff 2^-9 relative) but round at different
   places (fused QKV/gate-up GEMMs, accumulation order, fp32 vs bf16 intermediates in norms,
   rope and softmax, fused epilogues), so neither is the truth: each sits some distance d
   from the fp32 result, and two such implementations may differ by up to about 2d (triangle
   inequality). d is measured in the same run on the same weights and prompt instead of
   guessed: with HF's std-0.02 init the logits have a std of about 1.3 and the residual
   stream grows to ~10 over 28-32 layers, where one bf16 ulp is 0.06, so d is a few 1e-2.
   The floor 0.15 is the repo's tolerance for the tiny bf16 goldens (test/gpu/cuda_goldens.sh).
   Seen on the CPU (2026-12-01, Qwen3-0.6B shape, 32-token prompt, tx-run --device cpu):
   HF bf16 vs fp32 0.037, txc vs HF bf16 0.050, greedy flipped at token 2 on a 0.016 gap.
   Parity passes when max|dlogit| <= tol over the compared rows and over the teacher-forced
   rows, and the greedy tokens agree up to --parity-new or the first disagreement is a
   near-tie.
3. Speed, the same prompts for every engine (random ids, seed fixed):
   - batch-1 decode ms/token, 128-token prompt, --new tokens:
     txc: median decode-step wall time (`tx-run --timing`: since session 32 the token
          interval, one decode step's return to the next's, the engine's host work
          included; and GPU stream time) and, engine included, (whole run of `new` tokens - whole
          run of 1 token) / (new - 1); both are generate() times that exclude loading. These
          runs take tx-run's default path (CUDA graphs for decode, greedy argmax on the GPU).
          With --profile-ops, one more batch-1 run with `tx-run --profile-ops` (no CUDA graphs,
          every launch timed) records the GPU time per op kind.
     HF:  the median of per-step marks (a logits processor that records a CUDA event per
          generated token and changes nothing: one interval = forward + sampling + loop) and
          (generate(new) - generate(1)) / (new - 1), medians of --reps, after a warm-up.
     The "step median" rows compare txc's token interval (before session 32: its backend
     step without the engine's host work) with HF's whole loop iteration; the "engine incl."
     / difference rows compare whole runs.
   - time to first token, 2048-token prompt: txc the whole run of 1 new token (prefill, one
     sampling, engine) and the prefill-step median; HF generate(max_new_tokens=1). HF with a
     static cache prefills eagerly (generate compiles only the decode step), so its TTFT is
     the eager prefill on a static cache.
   - decode throughput at batch 32 and 64 (distinct 128-token prompts, `new` tokens each):
     tokens/s of the decode phase = B * (new - 1) / (run(new) - run(1)) for every engine,
     B / (median decode step) for every engine, and end to end = B * new / run(new) (prefill
     included). HF's static cache is sized per call (prompt + new; transformers 5 would keep
     the largest size of any earlier call), and TTFT runs last.
   HF compiled: `generation_config.cache_implementation = "static"` and
   `compile_config = CompileConfig(fullgraph=True, mode="reduce-overhead", dynamic=False)`,
   which is transformers 5's way of `torch.compile(model.forward, mode="reduce-overhead",
   fullgraph=True)` for generate: the decode step is compiled once per batch size, the prefill
   runs eager. Compile time = first generate(new) - a steady generate(new), printed. A compiled
   batch is skipped (and recorded as skipped) when its expected compile + run would pass the
   model's share of --budget-s.
4. Output: $OUT/model-bench-DATE.json (date, GPU, TXC_COMMIT, every figure and command) and a
   table on stdout at the end.

A tx-run failure is reported as `FAILED: MODEL: STEP: message`; the model's remaining txc
steps are skipped, the other models still run, the JSON is still written, and the exit
status is 1. A parity miss exits 4 (after everything ran). HF peer errors are recorded and
exit 3. Usage errors exit 2; the time limit (SIGTERM) 124.

GPU run. Here (development machine, MLIR), from the repo root:
    FROM_HEAD=1 bench/model_check.sh prepare build-bench/gpu
builds tx-run with CUDA from a clean `git archive HEAD` (build-bench/head-*) and fills
build-bench/gpu (git-ignored, ~18 MB, all that travels): tx-run, qwen3-0.6b.txm and
llama-3-8b.txm (`txc compile SHAPE --target sm_90a --no-weights --max-seqs 64
--max-batch-tokens 2048 --max-seq-len 4096`, weight-stripped) and commit.txt (TXC_COMMIT).
(Without FROM_HEAD it copies $TX_RUN, default build-cuda/bin/tx-run, and marks the commit
-dirty when runtime/tools/lib/include differ from HEAD.) Then one device call, repo root,
carry ["build-bench/gpu"], kind nvidia-h200, timeout 600:
    bench/model_check.sh run build-bench/gpu
which runs (under `timeout 590`; SIGTERM keeps what was measured, exit 124)
    python3 bench/model_bench.py --tx-run build-bench/gpu/tx-run --device cuda \
        --model qwen3-0.6b build-bench/gpu/qwen3-0.6b.txm \
        --model llama-3-8b build-bench/gpu/llama-3-8b.txm --out $OUT
and brings back $OUT/model-bench-DATE.json, model-bench.log and gpu.txt. The HF weights
(1.2 + 16 GB) are written to /tmp/txc-model-bench on the GPU machine, never under $OUT.
Guessed, not yet measured: ~3-4 min for Qwen3-0.6B, ~4-5 min for Llama-3-8B (16 GB
save_pretrained, ~10 s of weight binding per tx-run call, torch.compile per batch size);
compiled batches that do not fit --budget-s are skipped and say so. For every figure, one model per call:
    bench/model_check.sh run build-bench/gpu llama-3-8b

Local logic test (CPU, tiny fixture, HF compiled peer on CPU with mode=default):
    build/bin/txc compile test/fixtures/tiny-llama --no-weights -o /tmp/tiny.txm
    python3 bench/model_bench.py --tx-run build/bin/tx-run --device cpu \
        --model test/fixtures/tiny-llama /tmp/tiny.txm --prompt-len 16 --ttft-len 64 \
        --new 8 --batches 4,8 --parity-new 8 --compile-mode default --out /tmp/mb-out
"""
import argparse
import copy
import datetime
import json
import math
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_weights import config_dir_for, hf_model  # noqa: E402

TIMING_RE = re.compile(
    r"tx-run timing: (\d+) decode steps, median ([-\d.]+) ms wall, ([-\d.]+) ms GPU stream; "
    r"(\d+) prefill steps, median ([-\d.]+) ms wall, ([-\d.]+) ms GPU stream; "
    r"whole run ([-\d.]+) ms for (\d+) tokens")

START = time.monotonic()
COMPILE_S = []  # batch-1 compile times so far, to predict the next model's


def log(msg):
    print(f"[{time.monotonic() - START:7.1f}s] {msg}", flush=True)


class StepFailed(Exception):
    pass


class SkipTxc(Exception):
    """--no-txc: the peers run alone."""


# --- txc through tx-run -------------------------------------------------------------------

class TxRun:
    def __init__(self, args, name, artifact, weights_dir):
        self.args, self.name, self.artifact, self.weights = args, name, artifact, weights_dir
        self.commands = []

    def run(self, step, prompts, new, timing=True, logits=False, extra=()):
        page = 16
        kv_pages = len(prompts) * math.ceil((max(map(len, prompts)) + new) / page) + len(prompts) + 16
        cmd = [self.args.tx_run, self.artifact, "--device", self.args.device, "--weights", self.weights,
               "--max-new-tokens", str(new), "--ignore-eos", "--json", "--kv-pages", str(kv_pages)]
        if timing:
            cmd.append("--timing")
        if logits:
            cmd.append("--return-logits")
        cmd += list(extra) + self.args.tx_extra.split()
        for p in prompts:
            cmd += ["--prompt-ids", ",".join(map(str, p))]
        shown = " ".join(cmd[:cmd.index("--prompt-ids")]) + f" --prompt-ids ... x{len(prompts)}"
        self.commands.append({"step": step, "command": shown})
        t0 = time.monotonic()
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=self.args.tx_timeout)
        except subprocess.TimeoutExpired:
            raise StepFailed(f"{step}: tx-run ran past {self.args.tx_timeout} s: {shown}")
        process_s = time.monotonic() - t0
        if out.returncode != 0:
            raise StepFailed(f"{step}: tx-run exited {out.returncode}: {out.stderr.strip()[-2000:]}"
                             f"\n  command: {shown}")
        try:
            results = sorted((json.loads(l) for l in out.stdout.splitlines() if l.strip()),
                             key=lambda r: r["request"])
        except (ValueError, KeyError) as e:
            raise StepFailed(f"{step}: tx-run output is not one JSON object per line ({e})")
        if len(results) != len(prompts):
            raise StepFailed(f"{step}: tx-run returned {len(results)} results for {len(prompts)} prompts")
        for r in results:
            if len(r["output_ids"]) != new:
                raise StepFailed(f"{step}: request {r['request']} generated {len(r['output_ids'])} "
                                 f"tokens, expected {new} ({r.get('finish_reason')})")
        t = None
        if timing:
            m = TIMING_RE.search(out.stderr)
            if not m:
                raise StepFailed(f"{step}: no 'tx-run timing:' line in stderr: {out.stderr.strip()[-500:]}")
            g = m.groups()
            t = {"decode_steps": int(g[0]), "decode_wall_ms": float(g[1]), "decode_gpu_ms": float(g[2]),
                 "prefill_steps": int(g[3]), "prefill_wall_ms": float(g[4]), "prefill_gpu_ms": float(g[5]),
                 "whole_run_ms": float(g[6]), "tokens": int(g[7]),
                 "ops": [l[len("tx-run timing: "):].strip() for l in out.stderr.splitlines()
                         if l.startswith("tx-run timing: ") and not TIMING_RE.search(l)]}
        log(f"{self.name}: txc {step}: {process_s:.1f} s process"
            + (f", whole run {t['whole_run_ms']:.1f} ms, decode step {t['decode_wall_ms']:.3f} ms, "
               f"prefill step {t['prefill_wall_ms']:.2f} ms" if t else ""))
        return results, t, process_s


# --- HF ------------------------------------------------------------------------------------

def sync(dev):
    import torch
    if dev == "cuda":
        torch.cuda.synchronize()


class StepClock:
    """A logits processor that changes nothing and marks the stream once per generated token;
    consecutive marks are one decode step of generate (forward, sampling, loop overhead)."""

    def __init__(self, dev):
        self.dev, self.marks = dev, []

    def __call__(self, input_ids, scores):
        import torch
        if self.dev == "cuda":
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.marks.append(ev)
        else:
            self.marks.append(time.perf_counter())
        return scores

    def steps_ms(self):
        m = self.marks
        if self.dev == "cuda":
            return [a.elapsed_time(b) for a, b in zip(m, m[1:])]
        return [(b - a) * 1e3 for a, b in zip(m, m[1:])]


def hf_generate_ms(model, ids, new, dev, steps=None):
    """Wall ms of generate(new tokens); appends its per-step ms (new - 1 of them) to `steps`."""
    import torch
    from transformers import LogitsProcessorList
    clock = StepClock(dev)
    # generate sizes a static cache by the largest length any earlier call asked for; keep each
    # call's cache at its own prompt + new, as a fresh process would.
    if hasattr(model, "_previous_max_cache_length"):
        model._previous_max_cache_length = -1
    sync(dev)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                             do_sample=False, logits_processor=LogitsProcessorList([clock]))
    sync(dev)
    ms = (time.perf_counter() - t0) * 1e3
    if out.shape[1] != ids.shape[1] + new:
        raise RuntimeError(f"generate made {out.shape[1] - ids.shape[1]} tokens, expected {new}")
    if steps is not None:
        steps.extend(clock.steps_ms())
    return ms


def hf_measure(label, model, prompts, args, dev, res, budget_end, compiled):
    """Fills res (a dict) with label's figures; compiled peers are warmed (compiled) per shape.
    Decode per token two ways: the median of per-step marks (StepClock) and the difference of
    whole generate calls, (generate(new) - generate(1)) / (new - 1)."""
    import torch
    T = lambda p: torch.tensor(p, device=dev)  # noqa: E731
    new, reps = args.new, args.reps
    ids1 = T([prompts["p128"]])
    # batch-1 decode
    if compiled:
        est = max(60.0, 1.5 * COMPILE_S[-1]) if COMPILE_S else 90.0
        if time.monotonic() + est + 20 > START + args.hard_s:
            res["skipped"] = (f"the batch-1 compile (about {est:.0f} s expected) would pass the hard limit "
                              f"--hard-s {args.hard_s:.0f}")
            log(f"{label}: skipped: {res['skipped']}")
            return
    t0 = time.monotonic()
    first = hf_generate_ms(model, ids1, new if compiled else 2, dev)
    steps = []
    longs = [hf_generate_ms(model, ids1, new, dev, steps) for _ in range(reps)]
    shorts = [hf_generate_ms(model, ids1, 1, dev) for _ in range(reps)]
    long, short = statistics.median(longs), statistics.median(shorts)
    res["b1_decode_ms_per_token"] = (long - short) / (new - 1)
    res["b1_decode_step_ms"] = statistics.median(steps)
    res["b1_decode_step_ms_min_max"] = [min(steps), max(steps)]
    res["b1_generate_ms"] = {"new": long, "one": short}
    if compiled:
        res["compile_s_b1"] = (first - long) / 1e3
        COMPILE_S.append(res["compile_s_b1"])
        log(f"{label}: compile (batch 1) took {res['compile_s_b1']:.1f} s")
    last_compile_s = res.get("compile_s_b1", 0.0)
    log(f"{label}: b1 decode {res['b1_decode_step_ms']:.3f} ms/token per step, "
        f"{res['b1_decode_ms_per_token']:.3f} by difference ({time.monotonic() - t0:.1f} s)")
    # batches
    for b in args.batch_list:
        key = f"b{b}"
        ids = T(prompts["batch"][:b])
        est_s = (last_compile_s * 1.3 if compiled else 0) + 3 * longs[0] / 1e3 * (2 if b > 1 else 1) + 5
        if time.monotonic() + est_s > budget_end:
            res[key] = {"skipped": f"expected {est_s:.0f} s would pass the time budget "
                                   f"({budget_end - time.monotonic():.0f} s left for this model)"}
            log(f"{label}: batch {b} skipped: {res[key]['skipped']}")
            continue
        t0 = time.monotonic()
        first = hf_generate_ms(model, ids, new if compiled else 2, dev)
        steps = []
        long = statistics.median(hf_generate_ms(model, ids, new, dev, steps) for _ in range(args.batch_reps))
        short = hf_generate_ms(model, ids, 1, dev)
        step = statistics.median(steps)
        r = {"decode_tokens_per_s": b * (new - 1) / ((long - short) / 1e3),
             "step_tokens_per_s": b / (step / 1e3), "decode_step_ms": step,
             "e2e_tokens_per_s": b * new / (long / 1e3), "generate_ms": {"new": long, "one": short}}
        if compiled:
            r["compile_s"] = (first - long) / 1e3
            last_compile_s = r["compile_s"]
            log(f"{label}: compile (batch {b}) took {r['compile_s']:.1f} s")
        res[key] = r
        log(f"{label}: batch {b}: {r['step_tokens_per_s']:.0f} tok/s per step, {r['decode_tokens_per_s']:.0f} "
            f"by difference ({time.monotonic() - t0:.1f} s)")
    # TTFT last (its long static cache must not be what the decode runs use)
    ids_long = T([prompts["p_ttft"]])
    hf_generate_ms(model, ids_long, 1, dev)
    res["ttft_ms"] = statistics.median(hf_generate_ms(model, ids_long, 1, dev) for _ in range(reps))
    log(f"{label}: TTFT {args.ttft_len} tokens {res['ttft_ms']:.1f} ms")


# --- one model -------------------------------------------------------------------------------

def make_prompts(vocab, args, seed):
    rng = random.Random(seed)
    lo, hi = (1000, min(vocab, 100000)) if vocab > 4000 else (3, vocab)
    p = lambda n: [rng.randrange(lo, hi) for _ in range(n)]  # noqa: E731
    p128 = p(args.prompt_len)
    # request 0 of every batch is the batch-1 prompt, so its tokens can be compared
    return {"p128": p128, "p_ttft": p(args.ttft_len),
            "batch": [p128] + [p(args.prompt_len) for _ in range(max(args.batch_list, default=1) - 1)]}


def parity(name, model, txc, prompts, args, dev, rec):
    import torch
    ids = torch.tensor([prompts["p128"]], device=dev)
    with torch.no_grad():
        hf_last = model(ids).logits[0, -1].float()
        m32 = copy.deepcopy(model).float()
        ref32 = m32(ids).logits[0, -1].float()
        del m32
        if dev == "cuda":
            torch.cuda.empty_cache()
        gen = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.parity_new,
                             do_sample=False, output_logits=True, return_dict_in_generate=True)
    hf_ids = gen.sequences[0, ids.shape[1]:].tolist()
    hf_rows = torch.stack([l[0].float() for l in gen.logits])  # [n, vocab]
    bf16_vs_fp32 = (hf_last - ref32).abs().max().item()
    tol = max(0.15, 2 * bf16_vs_fp32)
    rec["hf_bf16_vs_fp32_max_abs"] = bf16_vs_fp32
    rec["hf_logit_std"] = hf_last.std().item()
    rec["hf_generate_row0_vs_forward_max_abs"] = (hf_rows[0] - hf_last).abs().max().item()
    rec["tolerance"] = tol
    rec["hf_ids"] = hf_ids
    results, _, _ = txc.run("parity", [prompts["p128"]], args.parity_new, timing=False, logits=True)
    tx_ids = results[0]["output_ids"]
    tx_rows = torch.tensor(results[0]["logits"], device=dev, dtype=torch.float32)
    if tx_rows.shape != hf_rows.shape:
        raise StepFailed(f"parity: tx-run logits {tuple(tx_rows.shape)}, HF {tuple(hf_rows.shape)}")
    rec["txc_ids"] = tx_ids
    first_diff = next((i for i, (a, b) in enumerate(zip(tx_ids, hf_ids)) if a != b), None)
    upto = len(hf_ids) if first_diff is None else first_diff + 1  # rows with equal prefixes
    d = (tx_rows[:upto] - hf_rows[:upto]).abs()
    per_row = d.max(dim=1).values.tolist()
    max_d = max(per_row)
    rec["txc_vs_hf_bf16_max_abs_prefill_row"] = per_row[0]
    rec["txc_vs_hf_bf16_max_abs_per_row"] = per_row
    rec["txc_vs_hf_bf16_max_abs"] = max_d
    rec["txc_vs_hf_bf16_mean_abs"] = d.mean().item()
    rec["txc_vs_hf_fp32_max_abs_prefill_row"] = (tx_rows[0] - ref32).abs().max().item()
    # Every row, past any disagreement: HF teacher-forced on txc's own tokens (one full forward,
    # no cache), so row i of both has the same prefix.
    with torch.no_grad():
        forced = torch.tensor([prompts["p128"] + tx_ids[:-1]], device=dev)
        p = len(prompts["p128"])
        tf_rows = model(forced).logits[0, p - 1:].float()
    tf = (tx_rows - tf_rows).abs().max(dim=1).values.tolist()
    rec["txc_vs_hf_teacher_forced_max_abs_per_row"] = tf
    rec["txc_vs_hf_teacher_forced_max_abs"] = max(tf)
    rec["greedy_tokens_compared"] = len(hf_ids)
    rec["greedy_agree"] = first_diff is None
    rec["first_disagreement"] = first_diff
    ok = max_d <= tol and max(tf) <= tol
    if first_diff is not None:
        top2 = torch.topk(hf_rows[first_diff], 2).values
        gap = (top2[0] - top2[1]).item()
        near_tie = gap < 2 * max_d
        tx_rank = int((hf_rows[first_diff] > hf_rows[first_diff][tx_ids[first_diff]]).sum().item())
        rec["at_first_disagreement"] = {"hf_top2_gap": gap, "near_tie": near_tie,
                                        "within_2x_tolerance": gap < 2 * tol,
                                        "txc_token_rank_in_hf": tx_rank}
        ok = ok and near_tie
    rec["pass"] = ok
    log(f"{name}: parity max|dlogit| {max_d:.4f}, all {len(tf)} rows teacher-forced {max(tf):.4f} "
        f"(tol {tol:.3f}; HF bf16 vs fp32 {bf16_vs_fp32:.4f}), "
        f"greedy {'agree' if first_diff is None else f'differ at {first_diff}'} -> "
        f"{'PASS' if ok else 'FAIL'}")


def bench_model(spec, artifact, args, dev, budget_end, out):
    import torch
    from transformers.generation.configuration_utils import CompileConfig

    name, cfg_dir = config_dir_for(spec, args.work_dir)
    rec = {"model": name, "artifact": artifact, "config": json.load(open(os.path.join(cfg_dir, "config.json"))),
           "txc": {}, "hf_eager": {}, "hf_compiled": {}, "parity": {}, "errors": []}
    out["models"].append(rec)
    weights = os.path.join(args.work_dir, name + "-hf")

    # 1. HF-made weights (bench/hf_weights.py makes the same for an A/B)
    t0 = time.monotonic()
    cfg, model = hf_model(cfg_dir, args.seed, dev)
    rec["hf_init_s"] = time.monotonic() - t0
    if not args.no_txc:
        t0 = time.monotonic()
        model.save_pretrained(weights)
        rec["hf_save_s"] = time.monotonic() - t0
        rec["weights_dir"] = weights
        log(f"{name}: HF random init {rec['hf_init_s']:.1f} s, save_pretrained {rec['hf_save_s']:.1f} s -> {weights}")
    model.generation_config.eos_token_id = None  # same as tx-run --ignore-eos: never stop early
    model.generation_config.pad_token_id = 0
    prompts = make_prompts(cfg.vocab_size, args, args.seed)
    txc = TxRun(args, name, artifact, weights)
    rec["txc_commands"] = txc.commands

    # 2. parity and 3. txc speed
    try:
        if args.no_txc:
            raise SkipTxc()
        parity(name, model, txc, prompts, args, dev, rec["parity"])
        T = rec["txc"]
        ref_ids = rec["parity"]["txc_ids"]
        agree = lambda ids: next((i for i, (a, b) in enumerate(zip(ids, ref_ids)) if a != b),  # noqa: E731
                                 min(len(ids), len(ref_ids)))
        r_new, t_new, _ = txc.run("b1 decode", [prompts["p128"]], args.new)
        T["tokens_agree_with_parity_run"] = {"b1": agree(r_new[0]["output_ids"]), "of": len(ref_ids)}
        _, t_one, _ = txc.run("b1 one token", [prompts["p128"]], 1)
        T["b1"] = {"decode_step_wall_ms": t_new["decode_wall_ms"], "decode_step_gpu_ms": t_new["decode_gpu_ms"],
                   "decode_ms_per_token_engine": (t_new["whole_run_ms"] - t_one["whole_run_ms"]) / (args.new - 1),
                   "timing_new": t_new, "timing_one": t_one}
        if args.profile_ops:
            _, t_prof, _ = txc.run("b1 --profile-ops", [prompts["p128"]], args.new, extra=["--profile-ops"])
            T["b1_profile_ops"] = t_prof
        _, t_ttft, _ = txc.run("TTFT", [prompts["p_ttft"]], 1)
        T["ttft"] = {"whole_run_ms": t_ttft["whole_run_ms"], "prefill_step_wall_ms": t_ttft["prefill_wall_ms"],
                     "prefill_step_gpu_ms": t_ttft["prefill_gpu_ms"], "prefill_steps": t_ttft["prefill_steps"],
                     "timing": t_ttft}
        for b in args.batch_list:
            rn, tn, _ = txc.run(f"batch {b}", prompts["batch"][:b], args.new)
            T["tokens_agree_with_parity_run"][f"b{b}"] = agree(rn[0]["output_ids"])
            _, t1, _ = txc.run(f"batch {b} one token", prompts["batch"][:b], 1)
            T[f"b{b}"] = {"decode_tokens_per_s": b * (args.new - 1) / ((tn["whole_run_ms"] - t1["whole_run_ms"]) / 1e3),
                          "step_tokens_per_s": b / (tn["decode_wall_ms"] / 1e3),
                          "step_gpu_tokens_per_s": b / (tn["decode_gpu_ms"] / 1e3) if tn["decode_gpu_ms"] > 0 else None,
                          "e2e_tokens_per_s": b * args.new / (tn["whole_run_ms"] / 1e3),
                          "timing_new": tn, "timing_one": t1}
    except SkipTxc:
        rec["txc"] = {"skipped": "--no-txc"}
        rec["parity"] = {"skipped": "--no-txc"}
    except StepFailed as e:
        msg = f"FAILED: {name}: {e}"
        print(msg, file=sys.stderr, flush=True)
        rec["errors"].append({"kind": "txc", "message": str(e)})
        out["txc_failed"] = True
    write_json(out, args)

    # 3. peers
    runs = []
    if args.no_eager:
        rec["hf_eager"] = {"skipped": "--no-eager"}
    else:
        runs.append(("hf_eager", False, None))
    if args.no_compiled:
        rec["hf_compiled"] = {"skipped": "--no-compiled"}
    else:
        runs.append(("hf_compiled", True, True))
    while runs:
        label, compiled, fullgraph = runs.pop(0)
        try:
            if compiled:
                torch._dynamo.reset()
                model.generation_config.cache_implementation = "static"
                cc = CompileConfig(fullgraph=fullgraph, mode=args.compile_mode, dynamic=False)
                if dev == "cpu":
                    cc._compile_all_devices = True
                model.generation_config.compile_config = cc
                rec[label]["compile_config"] = {"fullgraph": fullgraph, "mode": args.compile_mode,
                                                "dynamic": False}
            hf_measure(f"{name} {label}", model, prompts, args, dev, rec[label], budget_end, compiled)
        except Exception as e:  # a peer failing must not hide txc's figures
            traceback.print_exc()
            msg = f"{type(e).__name__}: {e}"[:2000]
            if compiled and fullgraph:
                # once more without fullgraph (graph breaks allowed), keeping the first error
                log(f"{name} {label}: fullgraph=True failed ({msg[:200]}); trying fullgraph=False")
                rec[label] = {"error_fullgraph": msg}
                runs.append((label, True, False))
            else:
                rec[label]["error"] = msg
                rec["errors"].append({"kind": label, "message": msg})
                out["peer_failed"] = True
        write_json(out, args)
    del model
    if dev == "cuda":
        torch._dynamo.reset()
        torch.cuda.empty_cache()


# --- output ------------------------------------------------------------------------------------

def write_json(out, args):
    out["wall_s"] = time.monotonic() - START
    path = os.path.join(args.out, f"model-bench-{out['date'][:10]}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(path + ".tmp", path)
    return path


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def table(out, args):
    lines = []
    for m in out["models"]:
        T, E, C, P = m["txc"], m["hf_eager"], m["hf_compiled"], m["parity"]
        g = lambda d, *ks: _get(d, ks)  # noqa: E731
        rows = [
            ("b1 decode ms/token (step median)", g(T, "b1", "decode_step_wall_ms"), g(E, "b1_decode_step_ms"),
             g(C, "b1_decode_step_ms"), ".3f"),
            ("b1 decode ms/token (engine incl.)", g(T, "b1", "decode_ms_per_token_engine"),
             g(E, "b1_decode_ms_per_token"), g(C, "b1_decode_ms_per_token"), ".3f"),
            (f"TTFT {args.ttft_len}-token prompt, ms", g(T, "ttft", "whole_run_ms"), g(E, "ttft_ms"),
             g(C, "ttft_ms"), ".1f"),
            (f"prefill step, {args.ttft_len} tokens, ms (median)", g(T, "ttft", "prefill_step_wall_ms"),
             None, None, ".1f"),
        ]
        for b in args.batch_list:
            rows.append((f"b{b} decode tok/s", g(T, f"b{b}", "decode_tokens_per_s"),
                         g(E, f"b{b}", "decode_tokens_per_s"), g(C, f"b{b}", "decode_tokens_per_s"), ".0f"))
            rows.append((f"b{b} decode tok/s (step median)", g(T, f"b{b}", "step_tokens_per_s"),
                         g(E, f"b{b}", "step_tokens_per_s"), g(C, f"b{b}", "step_tokens_per_s"), ".0f"))
            rows.append((f"b{b} end-to-end tok/s", g(T, f"b{b}", "e2e_tokens_per_s"),
                         g(E, f"b{b}", "e2e_tokens_per_s"), g(C, f"b{b}", "e2e_tokens_per_s"), ".0f"))
        lines.append(f"\n## {m['model']} ({out['gpu']}, commit {out['commit']})")
        lines.append("| what | txc | HF eager | HF compiled | txc speedup vs eager | vs compiled |")
        lines.append("| --- | --- | --- | --- | --- | --- |")
        for what, t, e, c, spec in rows:
            lower_better = "ms" in what
            ratio = lambda peer: (None if t is None or peer is None or t == 0 else  # noqa: E731
                                  (peer / t if lower_better else t / peer))
            x = lambda r: "-" if r is None else f"{r:.2f}x"  # noqa: E731
            lines.append(f"| {what} | {fmt(t, spec)} | {fmt(e, spec)} | {fmt(c, spec)} | {x(ratio(e))} | "
                         f"{x(ratio(c))} |")
        if "compile_s_b1" in C:
            comp = ", ".join(f"b{k[1:]} {C[k]['compile_s']:.0f} s" for k in C
                             if isinstance(C[k], dict) and "compile_s" in C[k])
            lines.append(f"HF compile: b1 {C['compile_s_b1']:.0f} s" + (f", {comp}" if comp else ""))
        for label, peer in (("HF eager", E), ("HF compiled", C)):
            if "skipped" in peer:
                lines.append(f"{label}: skipped, {peer['skipped']}")
            for k, v in peer.items():
                if isinstance(v, dict) and "skipped" in v:
                    lines.append(f"{label} {k}: skipped, {v['skipped']}")
        if P.get("pass") is not None:
            dis = P.get("at_first_disagreement")
            lines.append(
                f"parity: max|dlogit| {P['txc_vs_hf_bf16_max_abs']:.4f} vs HF bf16 generate, "
                f"{P['txc_vs_hf_teacher_forced_max_abs']:.4f} over all {P['greedy_tokens_compared']} rows "
                f"vs HF teacher-forced on txc's tokens (prefill row "
                f"{P['txc_vs_hf_bf16_max_abs_prefill_row']:.4f}; vs HF fp32 "
                f"{P['txc_vs_hf_fp32_max_abs_prefill_row']:.4f}; HF bf16 vs fp32 "
                f"{P['hf_bf16_vs_fp32_max_abs']:.4f}), tol {P['tolerance']:.3f}; greedy "
                + ("agree on all " + str(P["greedy_tokens_compared"]) if P["greedy_agree"] else
                   f"first differ at token {P['first_disagreement']} (HF top-2 gap {dis['hf_top2_gap']:.4f}, "
                   f"{'near-tie' if dis['near_tie'] else 'NOT a near-tie'})")
                + f" -> {'PASS' if P['pass'] else 'FAIL'}")
        agree = T.get("tokens_agree_with_parity_run")
        if agree:
            lines.append("txc device-greedy tokens equal to the parity run's (host argmax of --return-logits) for "
                         + ", ".join(f"{k}: first {v}" for k, v in agree.items() if k != "of")
                         + f" of {agree['of']}")
        for e in m["errors"]:
            lines.append(f"ERROR ({e['kind']}): {e['message'][:300]}")
    return "\n".join(lines)


def _get(d, ks):
    for k in ks:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d if isinstance(d, (int, float)) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tx-run", required=True)
    ap.add_argument("--model", nargs=2, action="append", required=True, metavar=("SHAPE_OR_DIR", "ARTIFACT"))
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/txc-out"))
    ap.add_argument("--work-dir", default="/tmp/txc-model-bench", help="HF weights go here (not under $OUT)")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--ttft-len", type=int, default=2048)
    ap.add_argument("--batches", default="32,64")
    ap.add_argument("--parity-new", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3, help="repeats of batch-1 and TTFT runs (HF)")
    ap.add_argument("--batch-reps", type=int, default=1, help="repeats of batch runs (HF)")
    ap.add_argument("--compile-mode", default="reduce-overhead")
    ap.add_argument("--no-compiled", action="store_true")
    ap.add_argument("--no-eager", action="store_true", help="no HF eager rows")
    ap.add_argument("--no-txc", action="store_true",
                    help="HF peers only, no HF weights written: txc's rows and parity come from another call "
                         "(a Llama-3-8B call holds txc's seven tx-run processes or HF compiled, not both)")
    ap.add_argument("--profile-ops", action="store_true",
                    help="one more batch-1 txc run with tx-run --profile-ops (GPU time per op kind)")
    ap.add_argument("--budget-s", type=float, default=520,
                    help="whole-run budget; HF compiled batches that would pass a model's share are skipped")
    ap.add_argument("--hard-s", type=float, default=575,
                    help="a compiled peer is not started when its batch-1 compile would end past this")
    ap.add_argument("--tx-timeout", type=float, default=300)
    ap.add_argument("--tx-extra", default="", help="more tx-run flags for every call, e.g. --tx-extra=--no-pdl")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    args.batch_list = [int(b) for b in args.batches.split(",") if b]
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work_dir, exist_ok=True)
    for _, artifact in args.model:
        if not os.path.isfile(artifact):
            sys.exit(f"model_bench: artifact {artifact} not found")
    if not os.access(args.tx_run, os.X_OK):
        sys.exit(f"model_bench: {args.tx_run} is not an executable")

    import torch
    import transformers
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("model_bench: --device cuda but torch sees no GPU")
    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "gpu": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
           "commit": os.environ.get("TXC_COMMIT", "unknown"), "torch": torch.__version__,
           "transformers": transformers.__version__, "device": args.device,
           "settings": {k: v for k, v in vars(args).items() if k != "model"}, "models": []}
    log(f"model_bench: {out['gpu']}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"commit {out['commit']}")
    n = len(args.model)

    def on_term(signum, frame):  # `timeout` sends SIGTERM: keep what was measured
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    try:
        for i, (spec, artifact) in enumerate(args.model):
            budget_end = START + args.budget_s * (i + 1) / n
            try:
                bench_model(spec, artifact, args, args.device, budget_end, out)
            except Exception as e:
                traceback.print_exc()
                msg = f"FAILED: {spec}: setup: {type(e).__name__}: {e}"
                print(msg, file=sys.stderr, flush=True)
                out.setdefault("setup_errors", []).append(msg)
                out["txc_failed"] = True
            write_json(out, args)
    except KeyboardInterrupt as e:
        out["interrupted"] = f"stopped at {time.monotonic() - START:.0f} s ({e}); later steps did not run"
        print(f"INTERRUPTED: {out['interrupted']}", file=sys.stderr, flush=True)
    path = write_json(out, args)
    print(table(out, args))
    for msg in out.get("setup_errors", []):
        print(msg)
    if "interrupted" in out:
        print("INTERRUPTED: " + out["interrupted"])
    print(f"\nwrote {path} ({out['wall_s']:.0f} s)")
    if "interrupted" in out:
        sys.exit(124)
    if out.get("txc_failed"):
        sys.exit(1)
    if not all(m["parity"].get("pass") for m in out["models"] if "skipped" not in m["parity"]):
        sys.exit(4)
    if out.get("peer_failed"):
        sys.exit(3)


if __name__ == "__main__":
    main()
