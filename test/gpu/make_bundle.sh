#!/usr/bin/env bash
# Assembles what the GPU machine needs into BUILD/gpu (git-ignored, carried by
# the device tool): the CUDA binaries and weight-free or small artifacts,
# compiled here because the GPU machine has no MLIR.
#   [BASE_TX_RUN="PATH | NAME=PATH..."] test/gpu/make_bundle.sh [BUILD]   (BUILD: a CUDA-on, compiler-on build; default build-cuda)
# It also packs BUILD/gpu-bundle.tgz (~32 MB: the device tool carries at most
# 64 MiB, the unpacked bundle with attention_bench is ~80). Then on the GPU
# machine (carry BUILD/gpu-bundle.tgz):
#   tar xzf BUILD/gpu-bundle.tgz -C BUILD && test/gpu/run_all.sh BUILD/gpu
# or, for the attention kernels against the torch peers:
#   tar xzf BUILD/gpu-bundle.tgz -C BUILD && bench/gpu_check.sh BUILD/gpu
set -eu
BUILD=${1:-build-cuda}
OUT=$BUILD/gpu
TXC=$BUILD/bin/txc
F=test/fixtures
mkdir -p "$OUT"
for bin in tx-run CudaBackendTests EngineTests decode_ops_bench attention_bench nvrtc_attention_test; do
  cp "$BUILD/bin/$bin" "$OUT/"
done
# Earlier commits' tx-runs, for an A/B across commits in one call
# (bench/ab_decode.py: a mode "base=--tx-run tx-run-base"): BASE_TX_RUN is a
# PATH (carried as tx-run-base) or words NAME=PATH (carried as NAME, which
# must start with tx-run-). ~12 MB packed each; two fit beside the bundle.
find "$OUT" -maxdepth 1 -name 'tx-run-*' -delete
for word in ${BASE_TX_RUN:-}; do
  name=tx-run-base path=$word
  case "$word" in *=*) name=${word%%=*} path=${word#*=} ;; esac
  case "$name" in
    tx-run-?*) cp "$path" "$OUT/$name" ;;
    *) echo "make_bundle: $name: a carried tx-run's name must start with tx-run-" >&2; exit 1 ;;
  esac
done
# HF-golden fixtures, as the e2e lit tests compile them.
"$TXC" compile $F/tiny-qwen3 --dtype f32 -o "$OUT/qwen3-f32.txm"
"$TXC" compile $F/tiny-qwen3 -o "$OUT/qwen3-bf16.txm"
"$TXC" compile $F/tiny-qwen2 --dtype f32 -o "$OUT/qwen2-f32.txm"
"$TXC" compile $F/tiny-llama -o "$OUT/llama-bf16.txm"
"$TXC" compile $F/tiny-mistral --dtype f32 -o "$OUT/mistral-f32.txm"
"$TXC" compile $F/tiny-mistral -o "$OUT/mistral-bf16.txm"
if [ -d ../shared/models/stories260K ]; then
  "$TXC" compile ../shared/models/stories260K -o "$OUT/stories.txm"
  cp ../shared/models/stories260K/golden.json "$OUT/stories-golden.json"
fi
# Real model shapes, weights generated at load (--random-weights on tx-run).
for shape in qwen3-0.6b llama-3-8b; do
  dir=$(mktemp -d)
  if python3 bench/make_shape_checkpoint.py "$shape" "$dir" >/dev/null 2>&1; then
    "$TXC" compile "$dir" --target sm_90a --no-weights --max-seqs 64 -o "$OUT/$shape.txm"
    # Without tx-fold-norm-weight, for comparison (ab_decode.py --artifact).
    "$TXC" compile "$dir" --target sm_90a --no-weights --max-seqs 64 --no-fold-norm-weights \
      -o "$OUT/$shape-unfolded.txm"
    cp "$dir/config.json" "$OUT/$shape.config.json"
  else
    echo "make_bundle: no $shape shape in bench/make_shape_checkpoint.py; skipped" >&2
  fi
  rm -rf "$dir"
done
du -sh "$OUT"
tar czf "$BUILD/gpu-bundle.tgz" -C "$BUILD" gpu
ls -l "$BUILD/gpu-bundle.tgz"
