#!/usr/bin/env bash
# One call on the GPU machine: the CUDA unit tests, the HF goldens through
# the CUDA backend, and decode/prefill step timings of the real model shapes
# (greedy and sampled; with FULL=1 also graphs/PDL off and per-op profiles).
# A full run is close to the device tool's 10 minutes: split it into
# SKIP_TIMINGS=1 (tests, mode comparisons, attention and op benchmarks) and
# TIMINGS_ONLY=1 (the step timings) calls. SKIP_OPS_BENCH=1 leaves out
# decode_ops_bench, SKIP_ATTENTION_BENCH=1 attention_bench. Tests and mode
# comparisons together take ~9 minutes: SKIP_MODES=1 (the unit tests and the
# goldens) and MODES_ONLY=1 (the mode comparisons) split them.
# The device tool brings back at most 8 files, so the logs are packed into
# $OUT/logs.tgz; the decode timings are also collected in $OUT/timings.txt.
#   [FULL=1] test/gpu/run_all.sh BUNDLE   (BUNDLE from test/gpu/make_bundle.sh)
set -u
B=${1:-build-cuda/gpu}
RESULTS=${OUT:-/tmp/txc-out}
OUT=$(mktemp -d /tmp/run_all.XXXX)/logs
mkdir -p "$OUT" "$RESULTS"
fails=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
if [ "${TIMINGS_ONLY:-0}" != 1 ]; then
if [ "${MODES_ONLY:-0}" != 1 ]; then
"$B/EngineTests" --gtest_brief=1 2>&1 | tail -3 | tee "$OUT/engine-tests.log" || fails=$((fails + 1))
timeout 300 "$B/CudaBackendTests" 2>&1 | tee "$OUT/cuda-backend-tests.log" | tail -15
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
test/gpu/cuda_goldens.sh "$B" "$B" 2>&1 | tee "$OUT/goldens.log" | grep -E "^==|FAIL|failures|steps compared"
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
fi # MODES_ONLY

if [ "${SKIP_MODES:-0}" != 1 ]; then
# Optional modes against the default on a real shape (library attention and GEMV).
mode() { python3 test/gpu/compare_modes.py "$B/tx-run" "$B/qwen3-0.6b.txm" "$@" -- --random-weights 1 \
  2>&1 | tee -a "$OUT/modes.log" | tail -1; [ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1)); }
mode --flags=--no-attention-pdl --atol 0 --batch 3
mode --flags=--no-cuda-graphs --atol 0.15 --batch 3 # split count follows the context bucket
mode --flags=--no-fuse-norms --atol 0.15 --batch 3
mode --flags=--host-sampling --sampled --batch 5
# The decode lookahead: the same greedy tokens (rows of one prompt length
# cross pages together; 40 new tokens cross two), and on Llama's shape.
mode --flags=--no-decode-lookahead --greedy-tokens --batch 3 --new 40
python3 test/gpu/compare_modes.py "$B/tx-run" "$B/llama-3-8b.txm" --flags=--no-decode-lookahead --greedy-tokens \
  --batch 1 --new 24 -- --random-weights 1 2>&1 | tee -a "$OUT/modes.log" | tail -1
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
mode --flags=--fuse-rope --atol 0 --batch 3
# Qwen3's group of 2 folds the rope into the decode attention and merges the
# splits in a cluster by default (decodeAttentionSetup): each against its
# alternative, bit for bit; the fold also with the newest key past the first
# tile (one split) and without early K/V.
mode --flags=--no-rope-in-attention --atol 0 --batch 3
python3 test/gpu/compare_modes.py "$B/tx-run" "$B/qwen3-0.6b.txm" --flags=--no-rope-in-attention --atol 0 --batch 2 \
  --prompt 100 -- --random-weights 1 --decode-split-min-tokens 4096 2>&1 | tee -a "$OUT/modes.log" | tail -1
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
python3 test/gpu/compare_modes.py "$B/tx-run" "$B/qwen3-0.6b.txm" --flags=--no-rope-in-attention --atol 0 --batch 2 \
  -- --random-weights 1 --no-attention-early-kv 2>&1 | tee -a "$OUT/modes.log" | tail -1
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
# (The split kernel: at these contexts the wide CTA would leave nothing to merge.)
python3 test/gpu/compare_modes.py "$B/tx-run" "$B/qwen3-0.6b.txm" --flags=--no-attention-cluster-combine --atol 0 \
  --batch 1 -- --random-weights 1 --no-decode-wide-cta 2>&1 | tee -a "$OUT/modes.log" | tail -1
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
python3 test/gpu/compare_modes.py "$B/tx-run" "$B/qwen3-0.6b.txm" --flags=--no-attention-cluster-combine --atol 0 \
  --batch 3 -- --random-weights 1 --no-decode-wide-cta 2>&1 | tee -a "$OUT/modes.log" | tail -1
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
# The wide CTA (default where the context bucket is <= 256 keys) against the
# split kernel: another softmax merge order, so bf16 rounding, same tokens.
mode --flags=--no-decode-wide-cta --atol 0.15 --batch 3
python3 test/gpu/compare_modes.py "$B/tx-run" "$B/llama-3-8b.txm" --flags=--no-decode-wide-cta --atol 0.15 \
  --batch 1 --new 8 -- --random-weights 1 2>&1 | tee -a "$OUT/modes.log" | tail -1
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
python3 test/gpu/compare_modes.py "$B/tx-run" "$B/llama-3-8b.txm" --flags=--no-rope-in-attention --atol 0 \
  --batch 1 --new 8 -- --random-weights 1 2>&1 | tee -a "$OUT/modes.log" | tail -1
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
# Llama's 16 splits merged in a cluster of 16 against the global merge.
python3 test/gpu/compare_modes.py "$B/tx-run" "$B/llama-3-8b.txm" \
  "--flags=--attention-cluster-combine --attention-cluster-max-splits 16" --atol 0 \
  --batch 1 --new 8 -- --random-weights 1 --no-decode-wide-cta 2>&1 | tee -a "$OUT/modes.log" | tail -1
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
mode --flags=--no-skinny-gemm --atol 0.15 --batch 5
mode --flags=--no-attention-early-kv --atol 0 --batch 3
mode --flags=--decode-gemm --atol 0.15 --batch 12
mode "--flags=--decode-min-splits 2" --atol 0.15 --batch 32 # splits change the rounding
mode --flags=--tune-gemms --atol 0.15 --batch 32 # another algorithm, another summation order
python3 test/gpu/compare_modes.py "$B/tx-run" "$B/llama-3-8b.txm" --flags=--no-attention-early-kv --atol 0 \
  --batch 2 --new 8 -- --random-weights 1 2>&1 | tee -a "$OUT/modes.log" | tail -1
[ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
fi # SKIP_MODES

# Decode attention: correctness (also with early K/V and the cluster merge) and
# the batch-1 diagnostics (bench/gpu_check.sh runs the whole attention bench with
# the torch peers).
if [ -x "$B/attention_bench" ] && [ "${SKIP_ATTENTION_BENCH:-0}" != 1 ]; then
  timeout 240 "$B/attention_bench" --decode-only --json "$OUT/attention-decode.json" 2>&1 | tee "$OUT/attention-decode.log" |
    grep -E "FAIL|diag b1 L(4096|32768) cuda-graph|b1 L4096 |b1 L32768 |diag b(1|32) L256|splits=(8|16) cluster"
  [ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
fi
fi # TIMINGS_ONLY
if [ "${SKIP_OPS_BENCH:-0}" != 1 ] && [ "${TIMINGS_ONLY:-0}" != 1 ]; then
  timeout 240 "$B/decode_ops_bench" --json "$OUT/decode-ops.json" 2>&1 | tee "$OUT/decode-ops.log"
  [ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
fi

# Decode timings: 128-token prompt, 128 new tokens, random weights (seed 1).
prompt=$(python3 -c "import random; r=random.Random(0); print(','.join(str(r.randrange(1000, 30000)) for _ in range(128)))")
timing() { # name artifact batch new-tokens extra-flags...
  local name=$1 art=$2 batch=$3 new=$4; shift 4
  local args=()
  for _ in $(seq "$batch"); do args+=(--prompt-ids "$prompt"); done
  echo "== $name"
  timeout 300 "$B/tx-run" "$art" --device cuda --random-weights 1 "${args[@]}" \
    --max-new-tokens "$new" --ignore-eos --timing "$@" 2>&1 >/dev/null | grep "tx-run timing" | tee "$OUT/$name.txt" | sed "s/^/$name: /" >>"$RESULTS/timings.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "FAILED: $name"; fails=$((fails + 1)); }
}
Q=$B/qwen3-0.6b.txm
L=$B/llama-3-8b.txm
sample=(--temperature 0.8 --top-k 50 --top-p 0.9 --seed 7)
if [ "${SKIP_TIMINGS:-0}" = 1 ]; then
  : # tests and benchmarks only
elif [ "${GEMV_ROWS_SWEEP:-0}" = 1 ]; then # small batches: GEMV (up to N rows) or cuBLASLt
  for b in 2 3 4; do for rows in 2 1; do timing "q06-b$b-gemv$rows" "$Q" "$b" 64 --gemv-max-rows "$rows"; done; done
  for b in 2 4; do [ -f "$L" ] && timing "l8b-b$b-gemv1" "$L" "$b" 32 --gemv-max-rows 1; done
else
timing q06-b1-graphs "$Q" 1 128
timing q06-b1-separate-norms "$Q" 1 128 --no-fuse-norms
timing q06-b1-fused-rope "$Q" 1 128 --fuse-rope
timing q06-b1-late-kv "$Q" 1 128 --no-attention-early-kv
timing q06-b1-graphs-again "$Q" 1 128
timing q06-b1-rope-kernel "$Q" 1 128 --no-rope-in-attention
timing q06-b1-global-merge "$Q" 1 128 --no-attention-cluster-combine
timing q06-b1-split32 "$Q" 1 128 --decode-split-min-tokens 32
timing q06-b1-tuned "$Q" 1 128 --tune-decode-attention
timing q06-b1-sampled "$Q" 1 128 "${sample[@]}"
timing q06-b32-graphs "$Q" 32 64
timing q06-b32-sampled "$Q" 32 64 "${sample[@]}"
timing q06-b32-host-sampled "$Q" 32 64 "${sample[@]}" --host-sampling
[ -f "$L" ] && timing l8b-b1-graphs "$L" 1 64
[ -f "$L" ] && timing l8b-b1-fused-rope "$L" 1 64 --fuse-rope
[ -f "$L" ] && timing l8b-b1-late-kv "$L" 1 64 --no-attention-early-kv
[ -f "$L" ] && timing l8b-b1-split32 "$L" 1 64 --decode-split-min-tokens 32
[ -f "$L" ] && timing l8b-b1-tuned "$L" 1 64 --tune-decode-attention
[ -f "$L" ] && timing l8b-b1-rope-kernel "$L" 1 64 --no-rope-in-attention
[ -f "$L" ] && timing l8b-b1-cluster-combine "$L" 1 64 --attention-cluster-combine
[ -f "$L" ] && timing l8b-b32-graphs "$L" 32 32
timing q06-b32-lazy-graphs "$Q" 32 64 --lazy-graphs
for b in 4 8; do
  timing "q06-b$b-skinny" "$Q" "$b" 64
  timing "q06-b$b-cublas" "$Q" "$b" 64 --no-skinny-gemm
done
[ -f "$L" ] && timing l8b-b32-lazy-graphs "$L" 32 32 --lazy-graphs
# cuBLASLt with its algorithms tuned per shape at startup against its heuristic's.
# (The 16-split cluster merge, the split floor and the decode GEMM lost at the
# kernel in device run 36 and are no longer timed in the model.)
timing q06-b32-tune-gemms "$Q" 32 64 --tune-gemms
[ -f "$L" ] && timing l8b-b32-tune-gemms "$L" 32 32 --tune-gemms
[ -f "$L" ] && timing l8b-b32-graphs-again "$L" 32 32
if [ "${FULL:-0}" = 1 ]; then # comparisons and profiles
  timing q06-b1-nographs "$Q" 1 128 --no-cuda-graphs
  timing q06-b1-nopdl "$Q" 1 128 --no-pdl
  timing q06-b1-profile "$Q" 1 32 --profile-ops
  for b in 2 4 8 64; do timing "q06-b$b-graphs" "$Q" "$b" 64; done
  [ -f "$L" ] && timing l8b-b1-profile "$L" 1 16 --profile-ops
  [ -f "$L" ] && timing l8b-b32-profile "$L" 32 8 --profile-ops
fi
fi # GEMV_ROWS_SWEEP
cp "$OUT/decode-ops.json" "$OUT/attention-decode.json" "$RESULTS/" 2>/dev/null
tar czf "$RESULTS/logs.tgz" -C "$(dirname "$OUT")" logs
echo "run_all failures: $fails"
exit $fails
