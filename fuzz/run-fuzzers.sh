#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time: run-fuzzers.sh BUILD_DIR SECONDS_EACH
# Inputs it finds go to BUILD_DIR/corpus/<name> (the committed seeds in
# fuzz/corpus/<name> stay untouched); a crash, a sanitizer report, an
# invariant abort or an input slower than 5 s fails the run.
set -euo pipefail
build=${1:?build dir}
seconds=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
status=0
for name in safetensors_header shard_index model_config; do
  corpus="$build/corpus/$name"
  mkdir -p "$corpus" "$build/artifacts/$name"
  echo "fuzz_$name: ${seconds}s"
  if ! "$build/bin/fuzz_$name" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
      -max_len=65536 -dict="$here/json.dict" -print_final_stats=1 \
      -artifact_prefix="$build/artifacts/$name/" "$corpus" "$here/corpus/$name" \
      2> "$build/fuzz_$name.log"; then
    echo "fuzz_$name FAILED; see $build/fuzz_$name.log and $build/artifacts/$name/"
    tail -30 "$build/fuzz_$name.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$build/fuzz_$name.log" | tail -2
  fi
done
exit $status
