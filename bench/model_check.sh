#!/usr/bin/env bash
# Whole-model benchmark + HF parity (bench/model_bench.py) in one GPU call.
#
# On the development machine (MLIR here), from the repo root:
#   bench/model_check.sh prepare [DIR]      # DIR defaults to build-bench/gpu
# makes DIR/tx-run (copied from $TX_RUN, default build-cuda/bin/tx-run: a CUDA build; with
# FROM_HEAD=1, built from a clean `git archive HEAD` in build-bench/head-*, ~4 min on 2 cores),
# DIR/qwen3-0.6b.txm and DIR/llama-3-8b.txm (txc compile --target sm_90a --no-weights from the
# shapes in bench/make_shape_checkpoint.py; weight-stripped, ~70 KB each) and DIR/commit.txt; ~18 MB in all.
#
# On the GPU machine (device tool, carry ["build-bench/gpu"]), from the repo root:
#   bench/model_check.sh run [DIR] [MODEL...]   # MODEL defaults to qwen3-0.6b llama-3-8b
# writes $OUT/model-bench-DATE.json, $OUT/model-bench.log and $OUT/gpu.txt, prints the table.
# The HF weights are made there (save_pretrained into /tmp/txc-model-bench, 17 GB for both).
# The run is stopped at 590 s (the device tool allows 600); what was measured is kept. If both
# models do not fit one call, run one model per call: `run build-bench/gpu llama-3-8b`.
# With test/gpu/make_bundle.sh's bundle in the same call (bundle + DIR exceed the tool's 64 MiB
# carry), carry the bundle, DIR/MODEL.txm and DIR/commit.txt, and take the bundle's tx-run:
#   TX_RUN=build-cuda/gpu/tx-run bench/model_check.sh run build-bench/gpu llama-3-8b
# (a Llama check needs ~400 s of the call, Qwen3 ~250 s).
set -u
cmd=${1:-}
DIR=${2:-build-bench/gpu}
case "$cmd" in
prepare)
  TXC=${TXC:-build/bin/txc}
  TX_RUN=${TX_RUN:-build-cuda/bin/tx-run}
  commit="$(git rev-parse --short HEAD)"
  if [ "${FROM_HEAD:-0}" = 1 ]; then
    # HEAD's tree into build-bench/head-src; files whose content did not change keep their
    # timestamps, so a rebuild after a bench-only commit is quick.
    src=build-bench/head-src
    fresh=$(mktemp -d)
    git archive HEAD | tar -x -C "$fresh" || exit 1
    mkdir -p "$src"
    (cd "$fresh" && find . -type f) | while read -r f; do
      cmp -s "$fresh/$f" "$src/$f" || { mkdir -p "$(dirname "$src/$f")" && cp "$fresh/$f" "$src/$f"; }
    done
    (cd "$src" && find . -type f) | while read -r f; do [ -e "$fresh/$f" ] || rm -f "$src/$f"; done
    rm -rf "$fresh"
    cmake -S "$src" -B build-bench/head-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DTXC_ENABLE_CUDA=ON -DTXC_ENABLE_COMPILER=OFF -DTXC_ENABLE_TESTS=OFF >/dev/null || exit 1
    ninja -C build-bench/head-build tx-run > build-bench/head-build.log 2>&1 ||
      { tail -20 build-bench/head-build.log; exit 1; }
    TX_RUN=build-bench/head-build/bin/tx-run
  else
    git diff --quiet HEAD -- runtime tools lib include 2>/dev/null || commit="$commit-dirty"
  fi
  [ -x "$TXC" ] || { echo "model_check: no txc at $TXC (make build)"; exit 1; }
  [ -x "$TX_RUN" ] || { echo "model_check: no tx-run at $TX_RUN (a -DTXC_ENABLE_CUDA=ON build)"; exit 1; }
  if "$TX_RUN" /nonexistent.txm --device cuda --prompt-ids 1 2>&1 | grep -q "has no CUDA backend"; then
    echo "model_check: $TX_RUN has no CUDA backend"; exit 1
  fi
  mkdir -p "$DIR"
  shapes=$(mktemp -d)
  for m in qwen3-0.6b llama-3-8b; do
    python3 bench/make_shape_checkpoint.py "$m" "$shapes/$m" >/dev/null || exit 1
    "$TXC" compile "$shapes/$m" --target sm_90a --no-weights --max-seqs 64 \
      --max-batch-tokens 2048 --max-seq-len 4096 -o "$DIR/$m.txm" >/dev/null || exit 1
  done
  rm -rf "$shapes"
  cp "$TX_RUN" "$DIR/tx-run"
  echo "$commit" > "$DIR/commit.txt"
  echo "model_check: $DIR ready ($(du -sh "$DIR" | cut -f1), commit $(cat "$DIR/commit.txt"))"
  ls -l "$DIR"
  ;;
run)
  shift 2 2>/dev/null || shift $#
  models=("$@")
  [ ${#models[@]} -gt 0 ] || models=(qwen3-0.6b llama-3-8b)
  OUT=${OUT:-/tmp/txc-out}
  mkdir -p "$OUT"
  DEVICE=${DEVICE:-cuda}
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,memory.used \
      --format=csv | tee "$OUT/gpu.txt"
  fi
  commit=${TXC_COMMIT:-$(cat "$DIR/commit.txt" 2>/dev/null || echo unknown)}
  margs=()
  for m in "${models[@]}"; do margs+=(--model "$m" "$DIR/$(basename "$m").txm"); done
  # BENCH_ARGS: more model_bench.py flags, space separated (e.g. "--no-compiled --batches 32
  # --tx-extra=--no-pdl"; "--no-txc --no-eager" for HF compiled alone, where a Llama call
  # cannot hold both it and txc's rows).
  # shellcheck disable=SC2086
  TXC_COMMIT=$commit PYTHONUNBUFFERED=1 timeout 590 python3 bench/model_bench.py \
    --tx-run "${TX_RUN:-$DIR/tx-run}" --device "$DEVICE" "${margs[@]}" --out "$OUT" ${BENCH_ARGS:-} 2>&1 |
    tee "$OUT/model-bench.log"
  rc=${PIPESTATUS[0]}
  echo "model_bench rc=$rc (0 ok, 1 tx-run failed, 2 usage, 3 HF peer error, 4 parity miss, 124 stopped at the time limit)"
  exit "$rc"
  ;;
*)
  sed -n '2,20p' "$0"; exit 2 ;;
esac
