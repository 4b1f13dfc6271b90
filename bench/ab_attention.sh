#!/usr/bin/env bash
# A/B of attention_bench builds in one device call: each NAME.gz (a gzipped
# attention_bench) runs in turn, ROUNDS times, with ARGS (default
# --prefill-only); each run's log goes to $OUT/ab-NAME-ROUND.log and its
# timing and phase lines to stdout. Carry the .gz files beside the bundle
# (an attention_bench is ~11 MB packed). With -- --decode-only, the decode
# rows instead.
#   [ROUNDS=2] bench/ab_attention.sh DIR NAME... [-- ARGS...]
set -u
dir=$1
shift
names=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do names+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--prefill-only)
OUT=${OUT:-/tmp/txc-out}
mkdir -p "$OUT"
for name in "${names[@]}"; do
  gunzip -c "$dir/$name.gz" > "/tmp/attention_bench-$name" && chmod +x "/tmp/attention_bench-$name"
done
for round in $(seq 1 "${ROUNDS:-2}"); do
  for name in "${names[@]}"; do
    log="$OUT/ab-$name-$round.log"
    timeout 120 "/tmp/attention_bench-$name" "${args[@]}" > "$log" 2>&1
    echo "== $name round $round rc=$? ($(grep -c FAIL "$log") FAIL)"
    grep -E "^  time  (causal|full) d128 L1024 |^  time  full d128 L(4096|16384) |^  phases .* full d128 L1024 consumer 0" "$log"
    # With --decode-only: the issue's decode rows and batch 1 in a graph.
    grep -E "^  time  b(1|64|256) L|^  time  diag b1 L(4096|32768) cuda-graph\+pdl\+early-kv " "$log"
  done
done
