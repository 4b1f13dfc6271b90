//===- Options.cpp - tx-run's command line ----------------------------------===//
#include "tools/tx-run/Options.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <iostream>
#include <sstream>
#include <utility>

namespace txc::txrun {

[[noreturn]] void fail(const std::string &message) {
  std::cerr << "tx-run: " << message << "\n";
  std::exit(2);
}

namespace {

const char *kUsage = R"(usage: tx-run MODEL.txm [options]

Generates from a compiled txc artifact. Every prompt is one request; all of
them run batched together in one engine.

Prompts (at least one):
  --prompt-ids 1,2,3      token ids, comma-separated (repeat for more requests)
  --prompt TEXT           text, encoded with the artifact's tokenizer.json
                          (repeatable; needs a tokenizer with BPE merges)
Generation:
  --max-new-tokens N      tokens to generate per request (default 16)
  --temperature T         0 = greedy (default 0)
  --top-k K               keep the K most likely tokens (0 = all)
  --top-p P               nucleus sampling threshold (default 1)
  --seed S                sampling seed (default 0)
  --ignore-eos            keep generating through EOS tokens
Model and backend:
  --device cpu|cuda       backend (default cpu; cuda needs the CUDA backend);
                          the flags marked (cuda) are refused with cpu
  --weights DIR           bind a weight-stripped artifact to safetensors in DIR
  --random-weights SEED   use seeded random weights instead of the artifact's
  --threads N             CPU threads (default: all cores)
  --kv-pages N            KV-cache pages per layer (default: from a budget of
                          1 GiB on cpu, 4 GiB on cuda, capped at what the
                          artifact's max sequences can use)
Output:
  --json                  one JSON object per request: request, prompt_ids,
                          output_ids, finish_reason (and text with a tokenizer)
  --return-logits         add "logits": the fp32 logits of every generated token
  --timing                print to stderr how long loading the artifact and
                          readying the backend took, and the median time of
                          decode and prefill steps: wall time of the backend's
                          step (of a decode step after another, the token
                          interval: from the one's return to the other's),
                          GPU stream time (CUDA) and the whole run
                          (without it, a load or start over 2 s is reported)
CUDA backend (the defaults are measured on the H200; these flags, marked
(cuda), are refused with --device cpu):
  --no-cuda-graphs        (cuda) launch decode steps one kernel at a time
  --[no-]decode-lookahead (cuda) queue each decode step's successor before
                          its tokens are back (its token ids taken on the
                          GPU; greedy or sampled on the device), so the GPU
                          need not wait for the host between steps (default
                          on)
  --lazy-graphs           (cuda) capture each decode graph at its first step
                          instead of all of them at startup (faster startup)
  --tune-gemms            (cuda) time at startup the first algorithms
                          cuBLASLt's heuristic offers for each decode-sized
                          GEMM (at most 256 rows) and keep the fastest
  --tune-decode-attention (cuda) time at startup the decode attention set-ups
                          (rope fold, cluster merge, 8-64-token chunks) that
                          --[no-]rope-in-attention, --[no-]attention-cluster-
                          combine and --decode-split-min-tokens leave open
                          (16 graph captures at startup) and keep the
                          fastest where it beats the default by over 1%;
                          --timing prints the choice
CUDA diagnostics (each measures a default against its alternative or
times the step's parts; bench/ and test/gpu/ use them, serving does not):
  --profile-ops           (cuda) also time every launch with CUDA events and
                          print the GPU time of each op kind; runs without
                          CUDA graphs, so steps are slower than without it
  --trace-step            (cuda) stamp every GEMV and decode attention kernel
                          of each decode step (globaltimer: first and last
                          block start, PDL wait release, last block end) and
                          print the last decode step's, with what each kind
                          of kernel adds to the step (diagnostics)
  --no-pdl                (cuda) launch kernels without programmatic dependent
                          launch (for comparison)
  --no-fuse-norms         (cuda) launch decode rms_norm on its own instead of
                          folding it into the GEMV after it (for comparison)
  --host-sampling         (cuda) copy non-greedy rows' logits to the host and
                          sample there instead of on the GPU (for comparison)
  --no-attention-pdl      (cuda) launch decode attention without programmatic
                          dependent launch (for comparison)
  --gemv-config ROWSxCOLS=WARPS/CHUNKS/WARPS_PER_SM
                          (cuda) the one-row GEMV of that weight shape with
                          4 or 8 warps a block, 2, 4 or 8 16-byte chunks in
                          flight a lane, K split toward that many warps per
                          SM (1-1024), instead of the measured rule; may be
                          repeated (for ranking configurations in the model)
  --gemv-max-rows 1|2     (cuda) at most this many rows per GEMM on the decode
                          GEMV, more elsewhere; by default 2 where K is at most
                          3072, else 1 (measured on the H200)
  --decode-split-min-tokens N
                          (cuda) split-KV decode chunks of at least N tokens
                          (default 64 where a KV head serves at most 2 query
                          heads, else 16: measured on the H200)
  --decode-min-splits N   (cuda) split-KV decode uses at least N splits (1-32)
                          where the chunks stay --decode-split-min-tokens long,
                          also when the batch alone fills the GPU (default 1)
  --carveout qkv|gemv|attention=PERCENT
                          (cuda) the decode step's QKV GEMV, its other
                          GEMVs, or its decode attention ask for this
                          shared-memory carveout, 0-100 percent of the SM's
                          L1 and shared memory (default: the driver's
                          choice per kernel); repeatable
  --ablate-decode-attention empty|none
                          (cuda; for measurement, the outputs are wrong)
                          decode steps launch an empty kernel where the
                          decode attention would run, or nothing: the step
                          time without it is what it costs in the step
  --ablate-decode-out-proj (cuda; for measurement, the outputs are wrong)
                          decode steps skip the GEMM after the decode
                          attention (its output projection): what folding
                          it into the attention could gain at most
  --attention-dependents start|after-wait|after-keys
                          (cuda) when the decode attention lets the kernel
                          after it launch: at its start (default), once its
                          wait releases, or once its keys are done (for
                          comparison)
  --attention-fold-passes N
                          (cuda; diagnostic) the decode attention computes
                          its folded q/k-norm and rotary N times a head, the
                          last kept (1-8; default 1): the step trace's fold
                          stamps then tell a cold pass from a warm one
  --attention-warm-fold, --no-attention-warm-fold
                          (cuda) the decode attention's folded rope also runs
                          once before its wait, as a dry pass that warms the
                          SM's instruction cache (default: where a KV head
                          serves at most 2 query heads, as measured on the
                          H200)
  --gemv-after-attention-late-dependents
                          (cuda) the GEMV after the decode attention lets
                          the kernel after it launch once its wait releases,
                          not at its start (for comparison)
  --staged-gemvs none|qkv|all
                          (cuda) which one-row GEMVs of at most 16 MB of
                          weights copy them into shared memory before their
                          wait instead of streaming them through registers
                          (default none; qkv: the projection before the
                          decode attention; for comparison)
  --no-decode-single-kv-stage
                          (cuda) the decode step's attention keeps its K/V
                          pipeline (~105 KB of shared memory at d128) where
                          one stage would do (chunks of one tile, one wave of
                          CTAs; for comparison)
  --no-decode-wide-cta    (cuda) the decode attention splits short contexts
                          and merges the splits, instead of one 16-warp CTA a
                          sequence and KV head taking them in one 256-key
                          tile (for comparison)
  --decode-wide-cta-max-keys N
                          (cuda) the wide CTA also takes planned contexts of
                          up to N keys (default 256, one tile), its tiles one
                          after another (for comparison; 256-65536)
  --no-attention-early-kv (cuda) decode attention reads every key after waiting
                          for the QKV kernel, not the older ones before it
                          (for comparison)
  --no-skinny-gemm        (cuda) decode GEMMs of 3-8 rows (K at most 3072) on
                          cuBLASLt instead of the tensor-core skinny GEMM
                          (for comparison)
  --decode-gemm           (cuda) decode GEMMs of up to 64 rows that the GEMV
                          and the skinny GEMM leave to cuBLASLt on the wgmma
                          decode GEMM instead (slower than cuBLASLt so far)
  --[no-]attention-cluster-combine
                          (cuda) decode attention merges its 2-8 splits in a
                          thread-block cluster, not through global memory,
                          where the step's clusters are resident at once
                          (default on where a KV head serves at most 2 query
                          heads, else off: measured on the H200)
  --attention-cluster-max-splits N
                          (cuda) the cluster merge takes up to N splits, 2-16
                          (default 8, the portable cluster size; above it a
                          non-portable cluster)
  --[no-]rope-in-attention
                          (cuda) no decode rope kernel: the decode attention
                          applies q/k-norm and rotary and appends the newest
                          K/V itself (default on: measured on the H200)
  --fuse-rope             (cuda) finish rope/q-k-norm/KV append in the QKV
                          GEMV's epilogue instead of its own kernel (for
                          comparison; measured slower)
  --help                  this text
)";

int64_t parseInteger(const std::string &flag, const std::string &text, int64_t min_value,
                     int64_t max_value) {
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < min_value || value > max_value)
    fail(flag + ": expected an integer in [" + std::to_string(min_value) + ", " +
         std::to_string(max_value) + "], got '" + text + "'");
  return value;
}

double parseNumber(const std::string &flag, const std::string &text) {
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(value == value))
    fail(flag + ": expected a number, got '" + text + "'");
  return value;
}

/// A flag's value among named choices: "FLAG takes A, B or C, not 'X'" else.
template <typename T>
T parseChoice(const std::string &flag, const std::string &word,
              std::initializer_list<std::pair<const char *, T>> choices) {
  std::string names;
  size_t i = 0;
  for (const auto &[name, choice] : choices) {
    if (word == name)
      return choice;
    names += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + std::string(name);
    ++i;
  }
  fail(flag + " takes " + names + ", not '" + word + "'");
}

/// --gemv-config ROWSxCOLS=WARPS/CHUNKS/WARPS_PER_SM, e.g. 28672x4096=4/4/64.
cuda::GemvShapeConfig parseGemvConfig(const std::string &flag, const std::string &text) {
  const std::string form = "expected ROWSxCOLS=WARPS/CHUNKS/WARPS_PER_SM (e.g. 28672x4096=4/4/64)";
  const size_t x = text.find('x'), eq = text.find('=');
  const size_t slash1 = text.find('/', eq == std::string::npos ? 0 : eq);
  const size_t slash2 = slash1 == std::string::npos ? slash1 : text.find('/', slash1 + 1);
  if (x == std::string::npos || eq == std::string::npos || x > eq || slash2 == std::string::npos)
    fail(flag + ": " + form + ", got '" + text + "'");
  cuda::GemvShapeConfig c;
  c.n = parseInteger(flag + " rows", text.substr(0, x), 1, INT32_MAX);
  c.k = parseInteger(flag + " columns", text.substr(x + 1, eq - x - 1), 8, INT32_MAX);
  c.warps_per_block = static_cast<int>(parseInteger(flag + " warps", text.substr(eq + 1, slash1 - eq - 1), 4, 8));
  c.unroll = static_cast<int>(
      parseInteger(flag + " chunks", text.substr(slash1 + 1, slash2 - slash1 - 1), 2, 8));
  c.target_warps_per_sm =
      static_cast<int>(parseInteger(flag + " warps per SM", text.substr(slash2 + 1), 1, 1024));
  if (c.warps_per_block != 4 && c.warps_per_block != 8)
    fail(flag + ": warps per block must be 4 or 8, got " + std::to_string(c.warps_per_block));
  if (c.unroll != 2 && c.unroll != 4 && c.unroll != 8)
    fail(flag + ": chunks in flight must be 2, 4 or 8, got " + std::to_string(c.unroll));
  return c;
}

std::vector<int32_t> parseIds(const std::string &text) {
  std::vector<int32_t> ids;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ','))
    ids.push_back(static_cast<int32_t>(parseInteger("--prompt-ids", item, 0, INT32_MAX)));
  if (ids.empty())
    fail("--prompt-ids: expected comma-separated token ids, got '" + text + "'");
  return ids;
}

} // namespace

Options parseArguments(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        fail(arg + ": missing value");
      return argv[++i];
    };
    // A flag only the CUDA backend reads: refused below unless --device cuda.
    auto cudaOnly = [&]() {
      if (options.cuda_only_flag.empty())
        options.cuda_only_flag = arg;
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--device") {
      options.device = value();
      if (options.device != "cpu" && options.device != "cuda")
        fail("--device: expected cpu or cuda, got '" + options.device + "'");
    } else if (arg == "--prompt-ids") {
      options.prompt_ids.push_back(parseIds(value()));
    } else if (arg == "--prompt") {
      options.prompts.push_back(value());
    } else if (arg == "--max-new-tokens") {
      options.sampling.max_new_tokens =
          static_cast<int32_t>(parseInteger(arg, value(), 1, INT32_MAX));
    } else if (arg == "--temperature") {
      options.sampling.temperature = static_cast<float>(parseNumber(arg, value()));
    } else if (arg == "--top-k") {
      options.sampling.top_k = static_cast<int32_t>(parseInteger(arg, value(), 0, INT32_MAX));
    } else if (arg == "--top-p") {
      options.sampling.top_p = static_cast<float>(parseNumber(arg, value()));
    } else if (arg == "--seed") {
      options.sampling.seed = static_cast<uint64_t>(parseInteger(arg, value(), 0, INT64_MAX));
    } else if (arg == "--ignore-eos") {
      options.sampling.ignore_eos = true;
    } else if (arg == "--weights") {
      options.weights_dir = value();
    } else if (arg == "--random-weights") {
      options.random_weights_seed = static_cast<uint64_t>(parseInteger(arg, value(), 0, INT64_MAX));
    } else if (arg == "--threads") {
      options.threads = static_cast<int>(parseInteger(arg, value(), 1, 4096));
    } else if (arg == "--kv-pages") {
      options.kv_pages = static_cast<int32_t>(parseInteger(arg, value(), 1, INT32_MAX));
    } else if (arg == "--json") {
      options.json = true;
    } else if (arg == "--return-logits") {
      options.return_logits = true;
    } else if (arg == "--profile-ops") {
      cudaOnly();
      options.cuda.profile_launches = true;
      options.timing = true;
    } else if (arg == "--no-decode-single-kv-stage") {
      cudaOnly();
      options.cuda.decode_single_kv_stage = false;
    } else if (arg == "--no-decode-wide-cta") {
      cudaOnly();
      options.cuda.decode_wide_cta = false;
    } else if (arg == "--attention-dependents") {
      cudaOnly();
      using Dependents = cuda::CudaExecutorOptions::AttentionDependents;
      options.cuda.attention_dependents = parseChoice<Dependents>(
          arg, value(),
          {{"start", Dependents::kAtStart}, {"after-wait", Dependents::kAfterWait}, {"after-keys", Dependents::kAfterTiles}});
    } else if (arg == "--staged-gemvs") {
      cudaOnly();
      using StagedGemvs = cuda::CudaExecutorOptions::StagedGemvs;
      options.cuda.staged_gemvs = parseChoice<StagedGemvs>(
          arg, value(), {{"none", StagedGemvs::kNone}, {"qkv", StagedGemvs::kQkv}, {"all", StagedGemvs::kAll}});
    } else if (arg == "--attention-warm-fold" || arg == "--no-attention-warm-fold") {
      cudaOnly();
      options.cuda.attention_warm_fold = arg == "--attention-warm-fold";
    } else if (arg == "--attention-fold-passes") {
      cudaOnly();
      options.cuda.attention_fold_passes = static_cast<int>(parseInteger(arg, value(), 1, 8));
    } else if (arg == "--gemv-after-attention-late-dependents") {
      cudaOnly();
      options.cuda.gemv_after_attention_late_dependents = true;
    } else if (arg == "--trace-step") {
      cudaOnly();
      options.cuda.trace_decode_steps = true;
      options.timing = true;
    } else if (arg == "--no-cuda-graphs") {
      cudaOnly();
      options.cuda.use_cuda_graphs = false;
    } else if (arg == "--decode-lookahead" || arg == "--no-decode-lookahead") {
      cudaOnly();
      options.cuda.decode_lookahead = arg == "--decode-lookahead";
    } else if (arg == "--no-pdl") {
      cudaOnly();
      options.cuda.use_pdl = false;
    } else if (arg == "--no-fuse-norms") {
      cudaOnly();
      options.cuda.fuse_norms = false;
    } else if (arg == "--host-sampling") {
      cudaOnly();
      options.cuda.device_sampling = false;
    } else if (arg == "--no-attention-pdl") {
      cudaOnly();
      options.cuda.attention_pdl = false;
    } else if (arg == "--gemv-config") {
      cudaOnly();
      options.cuda.gemv_configs.push_back(parseGemvConfig(arg, value()));
    } else if (arg == "--gemv-max-rows") {
      cudaOnly();
      options.cuda.gemv_max_rows = static_cast<int>(parseInteger(arg, value(), 1, 2));
    } else if (arg == "--decode-wide-cta-max-keys") {
      cudaOnly();
      options.cuda.decode_wide_cta_max_keys = parseInteger(arg, value(), 256, 65536);
    } else if (arg == "--attention-cluster-max-splits") {
      cudaOnly();
      options.cuda.attention_cluster_max_splits = static_cast<int>(parseInteger(arg, value(), 2, 16));
    } else if (arg == "--decode-min-splits") {
      cudaOnly();
      options.cuda.decode_min_splits = static_cast<int>(parseInteger(arg, value(), 1, 32));
    } else if (arg == "--decode-split-min-tokens") {
      cudaOnly();
      options.cuda.decode_split_min_tokens = static_cast<int>(parseInteger(arg, value(), 1, 1 << 20));
    } else if (arg == "--carveout") {
      cudaOnly();
      const std::string spec = value();
      const size_t eq = spec.find('=');
      const std::string kind = spec.substr(0, eq);
      int *target = kind == "qkv" ? &options.cuda.qkv_carveout_percent
                    : kind == "gemv" ? &options.cuda.gemv_carveout_percent
                    : kind == "attention" ? &options.cuda.attention_carveout_percent
                                          : nullptr;
      if (eq == std::string::npos || !target)
        fail("--carveout: expected qkv|gemv|attention=PERCENT, got '" + spec + "'");
      *target = static_cast<int>(parseInteger("--carveout " + kind, spec.substr(eq + 1), 0, 100));
    } else if (arg == "--ablate-decode-attention") {
      cudaOnly();
      using Ablation = cuda::CudaExecutorOptions::DecodeAttentionAblation;
      options.cuda.ablate_decode_attention = parseChoice<Ablation>(
          arg, value(), {{"empty", Ablation::kEmptyKernel}, {"none", Ablation::kNoLaunch}});
    } else if (arg == "--ablate-decode-out-proj") {
      cudaOnly();
      options.cuda.ablate_decode_out_proj = true;
    } else if (arg == "--no-attention-early-kv") {
      cudaOnly();
      options.cuda.attention_early_kv = false;
    } else if (arg == "--no-skinny-gemm") {
      cudaOnly();
      options.cuda.use_skinny_gemm = false;
    } else if (arg == "--decode-gemm") {
      cudaOnly();
      options.cuda.decode_gemm = true;
    } else if (arg == "--tune-decode-attention") {
      cudaOnly();
      options.cuda.tune_decode_attention = true;
    } else if (arg == "--tune-gemms") {
      cudaOnly();
      options.cuda.tune_gemms = true;
    } else if (arg == "--lazy-graphs") {
      cudaOnly();
      options.cuda.capture_graphs_at_start = false;
    } else if (arg == "--attention-cluster-combine" || arg == "--no-attention-cluster-combine") {
      cudaOnly();
      options.cuda.attention_cluster_combine = arg == "--attention-cluster-combine";
    } else if (arg == "--rope-in-attention" || arg == "--no-rope-in-attention") {
      cudaOnly();
      options.cuda.rope_in_attention = arg == "--rope-in-attention";
    } else if (arg == "--fuse-rope") {
      cudaOnly();
      options.cuda.fuse_rope = true;
    } else if (arg == "--timing") {
      options.timing = true;
    } else if (!arg.empty() && arg[0] == '-') {
      fail(arg + ": unknown option (see tx-run --help)");
    } else if (options.model.empty()) {
      options.model = arg;
    } else {
      fail(arg + ": unexpected argument; the model is already '" + options.model + "'");
    }
  }
  if (options.model.empty())
    fail("missing MODEL.txm (see tx-run --help)");
  if (options.prompt_ids.empty() && options.prompts.empty())
    fail("no prompt: pass --prompt-ids 1,2,3 or --prompt TEXT");
  if (!options.cuda_only_flag.empty() && options.device != "cuda")
    fail(options.cuda_only_flag + ": applies to --device cuda only");
  return options;
}

} // namespace txc::txrun
