#!/usr/bin/env bash
# Runs the NVRTC kernel test, the attention test/benchmark program and the torch peers in one call on
# the GPU machine, then prints the comparison table and writes
# $OUT/attention-<date>.json (results/ format). Usage, from the repo root:
#   TXC_COMMIT=<sha> bench/gpu_check.sh <dir holding attention_bench>
set -u
BIN_DIR=${1:-build-kernels/bin}
OUT=${OUT:-/tmp/txc-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
# Bounded, so that a hung kernel still leaves the rest of the device call
# (the tool stops a call at 600 s) and the logs come back.
timeout 120 "$BIN_DIR/nvrtc_attention_test" 2>&1 | tee "$OUT/nvrtc.log"
nvrtc_rc=${PIPESTATUS[0]}
timeout 360 "$BIN_DIR/attention_bench" --json "$OUT/ours.json" --prefill-compare 2>&1 | tee "$OUT/bench.log"
bench_rc=${PIPESTATUS[0]}
PYTHONUNBUFFERED=1 python3 bench/torch_attention_peers.py "$OUT/torch.json" 2>&1 | tee "$OUT/torch.log"
python3 bench/summarize.py "$OUT/ours.json" "$OUT/torch.json" "${TXC_COMMIT:-unknown}" "$OUT"
echo "attention_bench rc=$bench_rc nvrtc_attention_test rc=$nvrtc_rc"
[ "$bench_rc" = 0 ] && [ "$nvrtc_rc" = 0 ]
