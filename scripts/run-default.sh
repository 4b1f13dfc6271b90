#!/usr/bin/env bash
# The main job on the bundled default, run by `make run`: compile a model
# into an artifact and generate from it. The default is the real trained
# TinyStories model in ../shared/models/stories260K when it is there, else the
# committed tiny-llama fixture (random weights: its text is noise).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."

model=../shared/models/stories260K
prompt=(--prompt "Once upon a time")
if [ ! -d "$model" ]; then
  model=test/fixtures/tiny-llama
  prompt=(--prompt-ids 1,17,42)
fi

# On the GPU where one is present (and the build has the CUDA backend), on
# the CPU otherwise; both run the same plan.
device=cpu
target=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   [ -f "${build}/lib/libtxc_cuda_backend.a" ]; then
  device=cuda
  target=sm_90a
fi

artifact=${build}/default.txm
"${build}/bin/txc" compile "$model" --target "$target" -o "$artifact" --stats
"${build}/bin/txc" inspect "$artifact" | head -6
echo "txc: generating from ${model} on the ${device}"
"${build}/bin/tx-run" "$artifact" --device "$device" "${prompt[@]}" --max-new-tokens 100
echo
