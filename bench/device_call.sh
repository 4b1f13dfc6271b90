#!/usr/bin/env bash
# One device call's worth of GPU work, every result under $OUT. The device
# tool brings back at most 8 files: gpu.txt, then unit.log, check.log +
# check.tgz, and per ab step its summary .txt + a .tgz of its progress log
# and traces (so one call holds unit, check and two ab steps). Each step is bounded, so a hung or slow step
# still leaves the rest of the call and its output. From the repo root on the
# GPU machine, after `tar xzf build-cuda/gpu-bundle.tgz -C build-cuda`:
#   bench/device_call.sh BUNDLE COMMIT STEP...
# STEP is one of
#   unit                          CudaBackendTests (brief)
#   check                         bench/gpu_check.sh (kernels against torch)
#   runall                        test/gpu/run_all.sh's tests and mode comparisons
#                                 (SKIP_TIMINGS, no op or attention benchmarks;
#                                 ~550 s, bounded at 520, so a call of its own and
#                                 its last comparisons cut: run-all.log + logs.tgz)
#   tests | modes                 the same, its unit tests and goldens only, or its
#                                 mode comparisons only (run-all-tests.log,
#                                 run-all-modes.log + logs.tgz; bounded at 520)
#   ab:MODEL:MODES:ROUNDS:SECONDS[:ARGS]
#                                 bench/ab_decode.py --trace on BUNDLE/MODEL.txm
#                                 with the modes file MODES (random weights);
#                                 ARGS, space-separated, go to ab_decode.py
#                                 (e.g. "--prompt 2000 --new 32" or "--batch 8");
#                                 words after a "--" in ARGS go to every tx-run in
#                                 place of "--random-weights 1" (e.g. "--new 128 --
#                                 --weights /tmp/txc-hf/qwen3-0.6b --kv-pages 33")
#   hfweights:MODEL[:DIR]         bench/hf_weights.py: HF-made random weights of
#                                 MODEL's shape, model_check's own (seed 0), into DIR
#                                 (default /tmp/txc-hf/MODEL), for an ab step's
#                                 --weights; its log on stdout only (no file back)
#   prefill:MODEL[:PROMPT[:ROUNDS]]
#                                 the prefill of a PROMPT-token prompt (default 2048;
#                                 random weights) by BUNDLE/tx-run and each carried
#                                 BUNDLE/tx-run-*, in turn, ROUNDS times (default 3):
#                                 the prefill step (--timing) and the attention's time a
#                                 launch (--profile-ops); prefill-MODEL-PROMPT.txt
#                                 (session 24's runs 143-144: a change the kernel bench
#                                 missed showed here)
#   parity:MODEL:FLAGS            test/gpu/compare_modes.py: BUNDLE/MODEL.txm with the
#                                 tx-run FLAGS (space-separated) against without,
#                                 greedy logits within bf16's 0.15 (random weights):
#                                 a mode an ab step ranked, checked before it becomes
#                                 a default; parity-MODEL-FLAGS.txt
# e.g. bench/device_call.sh build-cuda/gpu abc1234 unit \
#        ab:llama-3-8b:bench/modes/decode-attention-carveout-llama.txt:1:240 check
set -u
B=$1 COMMIT=$2
shift 2
OUT=${OUT:-/tmp/txc-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt"
status=0
for step in "$@"; do
  start=$(date +%s)
  case "$step" in
    unit)
      timeout 120 "$B/CudaBackendTests" --gtest_brief=1 > "$OUT/unit.log" 2>&1
      rc=$?
      tail -n 15 "$OUT/unit.log";;
    check)
      OUT="$OUT/check" TXC_COMMIT="$COMMIT" timeout 300 bench/gpu_check.sh "$B" > "$OUT/check.log" 2>&1
      rc=$?
      (cd "$OUT" && tar czf check.tgz check && rm -rf check)
      grep -E "^  (time|phases)|FAIL" "$OUT/check.log" | head -n 80;;
    runall)
      SKIP_TIMINGS=1 SKIP_OPS_BENCH=1 SKIP_ATTENTION_BENCH=1 timeout 520 test/gpu/run_all.sh "$B" \
        > "$OUT/run-all.log" 2>&1
      rc=$?
      grep -E "PASSED|FAILED|FAIL|-> PASS|steps compared|failures" "$OUT/run-all.log" | tail -n 45;;
    tests | modes)
      part=$([ "$step" = tests ] && echo SKIP_MODES || echo MODES_ONLY)
      env "$part=1" SKIP_TIMINGS=1 SKIP_OPS_BENCH=1 SKIP_ATTENTION_BENCH=1 timeout 520 \
        test/gpu/run_all.sh "$B" > "$OUT/run-all-$step.log" 2>&1
      rc=$?
      grep -E "PASSED|FAILED|FAIL|-> PASS|steps compared|failures" "$OUT/run-all-$step.log" | tail -n 45;;
    ab:*)
      IFS=: read -r _ model modes rounds seconds args <<< "$step"
      name=$(basename "$modes" .txt)
      dir="ab-$model-$name$(echo "$args" | tr -c 'a-zA-Z0-9\n' '-' | sed 's/--*/-/g; s/-$//')"
      mkdir -p "$OUT/$dir"
      # ARGS: ab_decode.py's words, then after a "--" tx-run's for every run.
      ab_args=() tx_args=(--random-weights 1)
      # shellcheck disable=SC2206 # ARGS are words
      words=($args)
      for ((i = 0; i < ${#words[@]}; i++)); do
        if [ "${words[i]}" = -- ]; then
          tx_args=("${words[@]:i+1}")
          break
        fi
        ab_args+=("${words[i]}")
      done
      timeout "$seconds" python3 bench/ab_decode.py "$B/tx-run" "$B/$model.txm" --rounds "$rounds" --trace \
        "${ab_args[@]}" --trace-dir "$OUT/$dir/traces" --modes-file "$modes" -- "${tx_args[@]}" \
        > "$OUT/$dir.txt" 2> "$OUT/$dir/progress.err"
      rc=$?
      # Two files a step: the summary, and the progress log with every whole trace.
      (cd "$OUT" && tar czf "$dir.tgz" "$dir" && rm -rf "$dir")
      cat "$OUT/$dir.txt";;
    prefill:*)
      IFS=: read -r _ model prompt rounds <<< "$step"
      prompt=${prompt:-2048} rounds=${rounds:-3}
      file="$OUT/prefill-$model-$prompt.txt"
      ids=$(python3 -c "import random; r = random.Random(0); print(','.join(str(r.randrange(1000, 30000)) for _ in range($prompt)))")
      rc=0
      {
        echo "# the prefill of a $prompt-token prompt, $model, random weights: the prefill step" \
             "(tx-run --timing) and the attention a launch (--profile-ops, no CUDA graphs), $rounds rounds"
        for round in $(seq "$rounds"); do
          for bin in "$B"/tx-run "$B"/tx-run-*; do
            [ -x "$bin" ] || continue
            run=("$bin" "$B/$model.txm" --random-weights 1 --device cuda --max-new-tokens 1 --ignore-eos
                 --prompt-ids "$ids")
            timing=$(timeout 60 "${run[@]}" --timing 2>&1 |
                     grep -o "[0-9]* prefill steps, median [0-9.]* ms wall, [0-9.]* ms GPU stream") || rc=1
            ops=$(timeout 60 "${run[@]}" --profile-ops 2>&1 | grep -o "prefill txk.attention .*") || rc=1
            echo "$(basename "$bin") round $round: ${timing:-FAILED}; ${ops:-FAILED}"
          done
        done
      } > "$file"
      cat "$file";;
    parity:*)
      IFS=: read -r _ model flags <<< "$step"
      file="$OUT/parity-$model$(echo " $flags" | tr -c 'a-zA-Z0-9\n' '-' | sed 's/--*/-/g; s/-$//').txt"
      timeout 120 python3 test/gpu/compare_modes.py "$B/tx-run" "$B/$model.txm" --flags="$flags" --atol 0.15 \
        -- --random-weights 1 > "$file" 2>&1
      rc=$?
      cat "$file";;
    hfweights:*)
      IFS=: read -r _ model dir <<< "$step"
      dir=${dir:-/tmp/txc-hf/$model}
      mkdir -p "$(dirname "$dir")"
      timeout 120 python3 bench/hf_weights.py "$model" "$dir" > "/tmp/hfweights-$model.txt" 2>&1
      rc=$?
      tail -n 5 "/tmp/hfweights-$model.txt";;
    *)
      echo "device_call: unknown step '$step'" >&2
      rc=2;;
  esac
  echo "device_call: $step rc=$rc in $(( $(date +%s) - start )) s"
  [ "$rc" = 0 ] || status=1
done
exit $status
