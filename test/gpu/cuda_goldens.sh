#!/usr/bin/env bash
# Runs the CUDA backend against the HF goldens on a GPU machine.
#   test/gpu/cuda_goldens.sh BIN_DIR ARTIFACT_DIR
# BIN_DIR holds tx-run (built with -DTXC_ENABLE_CUDA=ON); ARTIFACT_DIR the
# artifacts compiled by txc beside it (test/gpu/make_bundle.sh: every fixture
# plus stories260K). Same tolerances as the CPU e2e tests.
set -u
BIN=$1; A=$2; F=test/fixtures; CG=test/e2e/check_goldens.py
fails=0
check() { echo "== $*"; python3 $CG "$BIN/tx-run" "$@" --device cuda || fails=$((fails + 1)); }
check $A/qwen3-f32.txm  $F/tiny-qwen3/golden.json --atol 1e-4
check $A/qwen3-f32.txm  $F/tiny-qwen3/golden.json --atol 1e-4 --batched
check $A/qwen3-bf16.txm $F/tiny-qwen3/golden.json --atol 0.15 --batched
check $A/qwen2-f32.txm  $F/tiny-qwen2/golden.json --atol 1e-4 --batched
check $A/llama-bf16.txm $F/tiny-llama/golden.json --atol 0.15 --batched
check $A/mistral-f32.txm $F/tiny-mistral/golden.json --atol 1e-4 --batched
check $A/mistral-bf16.txm $F/tiny-mistral/golden.json --atol 0.15 --batched
check $A/stories.txm    $A/stories-golden.json    --atol 1e-4 --batched
echo "failures: $fails"
exit $fails
