//===- CudaExecutorTest.cpp - Execution modes of the CUDA backend ----------===//
//
// The tiny model of cpu_backend/TinyModel.h (bf16, max 8 sequences) through
// Engine + CudaExecutor. Decode steps replayed from CUDA graphs (batch
// padded to its bucket), GEMMs on the GEMV kernel or cuBLASLt, programmatic
// dependent launch on or off, and greedy
// sampling on the device must all give what plain launches give: the same
// tokens, and logits within bf16 rounding of each other.
//
//===----------------------------------------------------------------------===//
#include "GpuTest.h"
#include "TestTensors.h"
#include "TinyModel.h"

#include "runtime/backends/cpu/CpuExecutor.h"
#include "runtime/backends/cpu/LogitsRecorder.h"
#include "runtime/backends/cuda/CudaExecutor.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

namespace txc::cuda {
namespace {

using cpu::testing::kTinyVocab;
using cpu::testing::TinyModelOptions;

struct Generation {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<std::vector<float>>> logits; // [request][step][vocab]
  int32_t graphs = 0;
  DecodeAttentionSetup decode_attention;
  DecodeAttentionTuning tuning;
};

std::vector<std::vector<int32_t>> prompts() {
  return {{1, 5, 9}, {7}, {3, 14, 15, 9, 26, 5, 35, 8, 9}, {60, 61, 62}, {12, 33}};
}

/// `model` written to the temp file `name` and loaded.
StatusOr<std::unique_ptr<artifact::LoadedArtifact>> tinyArtifact(const TinyModelOptions &model,
                                                                 const std::string &name) {
  const std::string path = cpu::testing::tempPath(name);
  TXC_RETURN_IF_ERROR(cpu::testing::writeTinyModel(path, model));
  return artifact::LoadedArtifact::load(path);
}

/// Request i of a test batch: `sampling` with its seed offset by i, EOS ignored.
engine::Request testRequest(const std::vector<int32_t> &prompt, engine::SamplingParams sampling,
                            size_t i, int32_t max_new_tokens) {
  engine::Request request;
  request.prompt_ids = prompt;
  request.sampling = std::move(sampling);
  request.sampling.seed += i;
  request.sampling.max_new_tokens = max_new_tokens;
  request.sampling.ignore_eos = true;
  return request;
}

/// The requests of `prompt_ids` together through `executor` (any backend),
/// request i stopping after new_tokens[i] tokens or at one of `stops`; with
/// `keep_logits` their logits recorded (host sampling), else drawn as the
/// executor draws.
Generation runRequests(engine::StepExecutor &executor, const engine::EngineConfig &config,
                       const std::vector<std::vector<int32_t>> &prompt_ids,
                       const std::vector<int32_t> &new_tokens, bool keep_logits,
                       const engine::SamplingParams &sampling = {},
                       const std::vector<int32_t> &stops = {}) {
  Generation run;
  cpu::LogitsRecorder recorder(executor);
  auto engine = engine::Engine::create(recorder, config);
  EXPECT_TRUE(engine.isOk()) << engine.status().toString();
  if (!engine.isOk())
    return run;
  std::vector<engine::Request> requests;
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    requests.push_back(testRequest(prompt_ids[i], sampling, i, new_tokens[i]));
    requests.back().sampling.stop_token_ids = stops;
    if (keep_logits)
      recorder.expectRequest(static_cast<engine::RequestId>(i), static_cast<int32_t>(prompt_ids[i].size()));
  }
  auto results = (*engine)->generate(requests);
  EXPECT_TRUE(results.isOk()) << results.status().toString();
  if (!results.isOk())
    return run;
  for (size_t i = 0; i < requests.size(); ++i) {
    run.tokens.push_back((*results)[i].output_ids);
    if (keep_logits)
      run.logits.push_back(recorder.rows(static_cast<engine::RequestId>(i)));
  }
  return run;
}

/// Runs every prompt together, greedy, 8 new tokens each; with
/// `keep_logits` through a LogitsRecorder (host sampling), else with
/// device greedy sampling.
Generation generate(const artifact::LoadedArtifact &artifact, const CudaExecutorOptions &options,
                    bool keep_logits, engine::SamplingParams sampling = {},
                    const std::vector<std::vector<int32_t>> &prompt_ids = prompts()) {
  auto executor = CudaExecutor::create(artifact, options);
  EXPECT_TRUE(executor.isOk()) << executor.status().toString();
  if (!executor.isOk())
    return {};
  Generation run = runRequests(**executor, (*executor)->engineConfig(), prompt_ids,
                               std::vector<int32_t>(prompt_ids.size(), 8), keep_logits, sampling);
  run.graphs = (*executor)->decodeGraphCount();
  run.decode_attention = (*executor)->decodeAttention();
  run.tuning = (*executor)->decodeAttentionTuning();
  return run;
}

void expectClose(const Generation &a, const Generation &b, double atol, const std::string &what) {
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  double worst = 0.0;
  for (size_t r = 0; r < a.logits.size(); ++r) {
    ASSERT_EQ(a.logits[r].size(), b.logits[r].size()) << what;
    for (size_t s = 0; s < a.logits[r].size(); ++s)
      for (size_t v = 0; v < a.logits[r][s].size(); ++v) {
        ASSERT_FALSE(std::isnan(a.logits[r][s][v])) << what;
        worst = std::max(worst, std::abs(double(a.logits[r][s][v]) - b.logits[r][s][v]));
      }
  }
  EXPECT_LE(worst, atol) << what;
}

using PromptBatch = std::vector<std::vector<int32_t>>;

/// `options` against `reference` on each batch of prompts (by default five
/// sequences together, then one): the same greedy tokens, logits within
/// `atol`.
void expectSameGenerations(const artifact::LoadedArtifact &artifact, const CudaExecutorOptions &reference,
                           const CudaExecutorOptions &options, double atol, const std::string &what,
                           const std::vector<PromptBatch> &batches = {prompts(), PromptBatch{prompts()[2]}}) {
  for (const PromptBatch &batch : batches) {
    Generation expected = generate(artifact, reference, true, {}, batch);
    Generation actual = generate(artifact, options, true, {}, batch);
    EXPECT_EQ(actual.tokens, expected.tokens) << what;
    expectClose(actual, expected, atol, what);
  }
}

/// expectSameGenerations of `base` against `base` with `change` applied,
/// with the decode step's rope folded into the attention and without.
template <typename Change>
void expectSameGenerationsEitherRope(const artifact::LoadedArtifact &artifact, CudaExecutorOptions base,
                                     Change change, double atol, const std::string &what) {
  for (bool fold : {true, false}) {
    base.rope_in_attention = fold;
    CudaExecutorOptions changed = base;
    change(changed);
    expectSameGenerations(artifact, base, changed, atol, what + ", fold " + std::to_string(fold));
  }
}

TEST(CudaExecutorTest, GraphsGemvAndDeviceGreedyAgreeWithPlainLaunches) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model;
  model.dtype = DType::kBF16;
  model.qk_norm = true;
  auto artifact = tinyArtifact(model, "tiny-cuda.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();

  CudaExecutorOptions plain;
  plain.use_cuda_graphs = false;
  plain.use_gemv = false;
  plain.use_pdl = false;
  Generation reference = generate(**artifact, plain, true);
  ASSERT_EQ(reference.tokens.size(), prompts().size());
  EXPECT_EQ(reference.graphs, 0);

  CudaExecutorOptions gemv = plain;
  gemv.use_gemv = true;
  gemv.use_pdl = true;
  gemv.use_skinny_gemm = false;
  Generation with_gemv = generate(**artifact, gemv, true);
  EXPECT_EQ(with_gemv.tokens, reference.tokens);
  // fp32 accumulation in another order, one bf16 rounding: a few ulps.
  expectClose(with_gemv, reference, 0.05, "GEMV + PDL against cuBLASLt");

  // Five sequences decode together: m = 5 goes to the skinny GEMM where K
  // allows (the down projection's K = 48 is not a multiple of 32: cuBLASLt).
  CudaExecutorOptions skinny = gemv;
  skinny.use_skinny_gemm = true;
  Generation with_skinny = generate(**artifact, skinny, true);
  EXPECT_EQ(with_skinny.tokens, reference.tokens);
  expectClose(with_skinny, reference, 0.05, "skinny GEMM against cuBLASLt");

  CudaExecutorOptions fused = gemv;
  fused.fuse_norms = true;
  fused.fuse_rope = true;
  fused.attention_pdl = true;
  Generation with_fused_norms = generate(**artifact, fused, true);
  EXPECT_EQ(with_fused_norms.tokens, reference.tokens);
  expectClose(with_fused_norms, reference, 0.05,
              "norms and rope fused into the GEMV, attention PDL");

  CudaExecutorOptions graphs = gemv;
  graphs.use_cuda_graphs = true;
  graphs.capture_graphs_at_start = false;
  Generation with_graphs = generate(**artifact, graphs, true);
  EXPECT_EQ(with_graphs.tokens, reference.tokens);
  EXPECT_GT(with_graphs.graphs, 0) << "decode steps must run on graphs";
  // Same kernels on the same rows: padding must not change a real row.
  expectClose(with_graphs, with_gemv, 0.0, "graph replay against plain launches");

  CudaExecutorOptions at_start = graphs;
  at_start.capture_graphs_at_start = true;
  Generation with_graphs_at_start = generate(**artifact, at_start, true);
  EXPECT_EQ(with_graphs_at_start.tokens, reference.tokens);
  expectClose(with_graphs_at_start, with_graphs, 0.0, "graphs captured at startup");

  Generation device_greedy = generate(**artifact, graphs, false);
  EXPECT_EQ(device_greedy.tokens, reference.tokens);

  // Top-k + top-p sampling on the device draws what the host sampler draws
  // from the same logits (the recorder forces host sampling).
  engine::SamplingParams sampled;
  sampled.temperature = 1.2f;
  sampled.top_k = 20;
  sampled.top_p = 0.9f;
  sampled.seed = 42;
  Generation host_sampled = generate(**artifact, graphs, true, sampled);
  Generation backend_host_sampled = generate(**artifact, graphs, false, sampled);
  EXPECT_EQ(backend_host_sampled.tokens, host_sampled.tokens);
  CudaExecutorOptions on_device = graphs;
  on_device.device_sampling = true;
  Generation device_sampled = generate(**artifact, on_device, false, sampled);
  EXPECT_EQ(device_sampled.tokens, host_sampled.tokens);
  EXPECT_NE(host_sampled.tokens, reference.tokens) << "sampling must not be greedy here";
}

/// bf16, heads of 128 (the tensor-core decode kernel), two query heads per
/// KV head, q/k-norm: the shape the rope fold and the tuning apply to.
TinyModelOptions groupOfTwoModel(int layers) {
  TinyModelOptions model;
  model.dtype = DType::kBF16;
  model.qk_norm = true;
  model.num_layers = layers;
  model.hidden = 256;
  model.heads = 4;
  model.kv_heads = 2;
  model.head_dim = 128;
  model.intermediate = 512;
  return model;
}

// The decode step's rope folded into the attention kernel
// (rope_in_attention): heads of 128 so the tensor-core decode kernel runs
// (GQA group 2), q/k-norm and biases, five sequences (the graph's padding
// rows append nothing) and one. The kernel runs the rope kernel's
// arithmetic (attention/rope.cuh), so the logits must agree to the bit.
TEST(CudaExecutorTest, RopeFoldedIntoAttentionMatchesTheRopeKernel) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model = groupOfTwoModel(3);
  auto artifact = tinyArtifact(model, "tiny-cuda-rope-in-attention.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  CudaExecutorOptions rope_kernel;
  rope_kernel.rope_in_attention = false;
  CudaExecutorOptions folded;
  folded.rope_in_attention = true;
  expectSameGenerations(**artifact, rope_kernel, folded, 0.0, "rope folded into the decode attention");
}

// gemv_configs: every 2-D weight's one-row GEMV on a configuration far
// from the rule's (4 warps, 8 chunks, K split toward 1024 warps per SM) runs
// the same model: other K slices sum in another order, a few ulps. Outside
// the configurations the kernel has, the executor refuses it.
TEST(CudaExecutorTest, GemvConfigsByShapeReplaceTheRule) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model;
  model.dtype = DType::kBF16;
  auto artifact = tinyArtifact(model, "tiny-cuda-gemv-configs.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  CudaExecutorOptions rule;
  CudaExecutorOptions configured;
  for (const auto &weight : (*artifact)->weights())
    if (weight.shape.size() == 2)
      configured.gemv_configs.push_back({weight.shape[0], weight.shape[1], 4, 8, 1024});
  ASSERT_FALSE(configured.gemv_configs.empty());
  const std::vector<std::vector<int32_t>> one{prompts()[2]};
  Generation reference = generate(**artifact, rule, true, {}, one);
  Generation with_configs = generate(**artifact, configured, true, {}, one);
  EXPECT_EQ(with_configs.tokens, reference.tokens);
  expectClose(with_configs, reference, 0.05, "GEMV configurations by shape");

  CudaExecutorOptions bad;
  bad.gemv_configs.push_back({64, 64, 3, 2, 16});
  auto refused = CudaExecutor::create(**artifact, bad);
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find("GEMV configuration 3/2/16 for [64, 64]"), std::string::npos)
      << refused.status().toString();
}

// decode_single_kv_stage (on by default where chunks fit one tile) only
// changes when K/V tiles load: the logits agree to the bit with the
// pipelined kernel, one sequence and five, the rope folded in or not.
// (Chunks of several tiles through one stage: attention_bench's
// "single-stage" checks.)
TEST(CudaExecutorTest, SingleKvStageDecodeMatchesThePipeline) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model = groupOfTwoModel(2);
  auto artifact = tinyArtifact(model, "tiny-cuda-single-kv-stage.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  CudaExecutorOptions pipelined;
  pipelined.decode_split_min_tokens = 16;
  pipelined.decode_wide_cta = false; // the split kernel, whose stages this is about
  pipelined.decode_single_kv_stage = false;
  expectSameGenerationsEitherRope(
      **artifact, pipelined, [](CudaExecutorOptions &o) { o.decode_single_kv_stage = true; }, 0.0,
      "single K/V stage");
}

// decode_wide_cta: one 16-warp CTA a (sequence, kv head) takes the whole
// context in a 256-key tile, against the split kernel: the same greedy
// tokens, logits within the rounding of another softmax merge order, one
// sequence and five, the rope folded in or not. (Contexts past one tile,
// run through it one after another: attention_bench's "wide" checks.)
TEST(CudaExecutorTest, WideCtaDecodeMatchesTheSplitKernel) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model = groupOfTwoModel(2);
  auto artifact = tinyArtifact(model, "tiny-cuda-wide-cta.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  CudaExecutorOptions split;
  split.decode_split_min_tokens = 16;
  split.decode_wide_cta = false;
  expectSameGenerationsEitherRope(
      **artifact, split, [](CudaExecutorOptions &o) { o.decode_wide_cta = true; }, 0.05, "wide CTA");
}

// decode_wide_cta_max_keys past one tile: a 300-token context (graph
// bucket 512) runs through the wide CTA's tile twice, one tile after the
// other, against the split kernel's merge; two sequences and one.
TEST(CudaExecutorTest, WideCtaOverTwoTilesMatchesTheSplitKernel) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model = groupOfTwoModel(2);
  model.max_seq_len = 512;
  auto artifact = tinyArtifact(model, "tiny-cuda-wide-cta-tiles.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  std::vector<int32_t> long_prompt(300), other(280);
  for (size_t i = 0; i < long_prompt.size(); ++i)
    long_prompt[i] = static_cast<int32_t>((i * 7 + 3) % kTinyVocab);
  for (size_t i = 0; i < other.size(); ++i)
    other[i] = static_cast<int32_t>((i * 5 + 1) % kTinyVocab);
  CudaExecutorOptions split;
  split.decode_wide_cta = false;
  CudaExecutorOptions wide;
  wide.decode_wide_cta_max_keys = 1024;
  expectSameGenerations(**artifact, split, wide, 0.05, "wide CTA over two tiles",
                        {PromptBatch{long_prompt, other}, PromptBatch{long_prompt}});
}

// attention_dependents moves only when the next kernel may launch: the
// logits agree to the bit, with one sequence and five.
TEST(CudaExecutorTest, DependentsOfTheDecodeAttentionChangeNoLogit) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model = groupOfTwoModel(2);
  auto artifact = tinyArtifact(model, "tiny-cuda-late-dependents.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  using Dependents = CudaExecutorOptions::AttentionDependents;
  CudaExecutorOptions at_start;
  for (Dependents when : {Dependents::kAfterWait, Dependents::kAfterTiles}) {
    CudaExecutorOptions later;
    later.attention_dependents = when;
    expectSameGenerations(**artifact, at_start, later, 0.0,
                          when == Dependents::kAfterWait ? "dependents after the wait" : "dependents after the keys");
  }
}

// attention_fold_passes (a diagnostic): the folded rope's arithmetic run
// three times a head, the last kept, changes no logit; nor does the
// attention running its fold dry before the wait (attention_warm_fold),
// where a cache store or a stale line kept from the dry pass would show.
TEST(CudaExecutorTest, RepeatedFoldPassesChangeNoLogit) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model = groupOfTwoModel(2);
  auto artifact = tinyArtifact(model, "tiny-cuda-fold-passes.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  CudaExecutorOptions once;
  CudaExecutorOptions thrice;
  thrice.attention_fold_passes = 3;
  expectSameGenerations(**artifact, once, thrice, 0.0, "fold passes");
  CudaExecutorOptions with_dry_fold, without_dry_fold;
  with_dry_fold.attention_warm_fold = true;
  without_dry_fold.attention_warm_fold = false;
  expectSameGenerations(**artifact, without_dry_fold, with_dry_fold, 0.0, "a dry fold before the wait");
}

/// Greedy on the device, request i of `prompt_ids` stopping after
/// new_tokens[i] tokens or at one of `stops`: the tokens, and the decode
/// steps queued ahead and run on (decode_lookahead).
struct StaggeredRun {
  std::vector<std::vector<int32_t>> tokens;
  int64_t queued = 0, taken = 0;
};
StaggeredRun generateStaggered(const artifact::LoadedArtifact &artifact,
                               const CudaExecutorOptions &options,
                               const std::vector<std::vector<int32_t>> &prompt_ids,
                               const std::vector<int32_t> &new_tokens,
                               const std::vector<int32_t> &stops = {},
                               engine::SamplingParams sampling = {}) {
  StaggeredRun run;
  auto executor = CudaExecutor::create(artifact, options);
  EXPECT_TRUE(executor.isOk()) << executor.status().toString();
  if (!executor.isOk())
    return run;
  run.tokens = runRequests(**executor, (*executor)->engineConfig(), prompt_ids, new_tokens, false, sampling, stops)
                   .tokens;
  run.queued = (*executor)->decodeStepsQueuedAhead();
  run.taken = (*executor)->decodeStepsRunAhead();
  return run;
}

// decode_lookahead: decode steps queued before the previous step's tokens
// are back give the tokens of steps run one at a time, where rows finish at
// different steps (the queued step holds the rows that go on, or none is
// queued where a row that ends comes before one that goes on), cross
// into new pages (given a step early by the engine), stop at a stop token
// (the queued step dropped), reach max_seq_len, or are sampled on the device
// (the queued step drawn with the engine's next uniform); and one sequence
// runs every decode step but the first on a step queued ahead.
TEST(CudaExecutorTest, DecodeLookaheadGivesTheTokensOfOneStepAtATime) {
  TXC_SKIP_WITHOUT_GPU();
  for (bool grouped : {false, true}) {
    TinyModelOptions model = grouped ? groupOfTwoModel(2) : TinyModelOptions{};
    if (!grouped)
      model.dtype = DType::kBF16;
    auto artifact = tinyArtifact(model, grouped ? "tiny-cuda-ahead-g2.txm" : "tiny-cuda-ahead.txm");
    ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
    const std::string what = grouped ? "heads of 128, GQA 2" : "the tiny model";
    CudaExecutorOptions step_by_step;
    step_by_step.decode_lookahead = false;
    CudaExecutorOptions ahead;
    ahead.decode_lookahead = true;

    const std::vector<int32_t> staggered = {3, 40, 7, 25, 1};
    StaggeredRun expected = generateStaggered(**artifact, step_by_step, prompts(), staggered);
    StaggeredRun actual = generateStaggered(**artifact, ahead, prompts(), staggered);
    EXPECT_EQ(actual.tokens, expected.tokens) << what << ", five rows finishing apart";
    EXPECT_EQ(expected.queued, 0) << what;
    EXPECT_GT(actual.taken, 30) << what << ", five rows finishing apart";

    const std::vector<std::vector<int32_t>> one = {{7}};
    StaggeredRun alone = generateStaggered(**artifact, step_by_step, one, {40});
    StaggeredRun alone_ahead = generateStaggered(**artifact, ahead, one, {40});
    EXPECT_EQ(alone_ahead.tokens, alone.tokens) << what << ", one row";
    // 40 steps of one token (the one-token prompt's first too): the first
    // has none queued before it; the pages positions 16 and 32 open are the
    // row's a step early (the engine's reserve_next_page), so every other
    // step runs on the step queued ahead.
    EXPECT_EQ(alone_ahead.taken, 39) << what << ", one row";
    EXPECT_EQ(alone_ahead.queued, alone_ahead.taken) << what << ", one row: none after its last token";

    ASSERT_EQ(alone.tokens.size(), 1u);
    ASSERT_GT(alone.tokens[0].size(), 12u);
    const std::vector<int32_t> stop = {alone.tokens[0][12]};
    StaggeredRun stopped = generateStaggered(**artifact, step_by_step, one, {40}, stop);
    StaggeredRun stopped_ahead = generateStaggered(**artifact, ahead, one, {40}, stop);
    EXPECT_EQ(stopped_ahead.tokens, stopped.tokens) << what << ", a stop token";
    EXPECT_EQ(stopped_ahead.queued, stopped_ahead.taken + 1) << what << ": the step after the stop is dropped";
    EXPECT_LE(stopped.tokens[0].size(), 13u) << what;

    // Top-k / top-p sampling on the device: the queued step draws with the
    // engine's next uniform, the same tokens as step by step.
    engine::SamplingParams sampled;
    sampled.temperature = 1.2f;
    sampled.top_k = 20;
    sampled.top_p = 0.9f;
    sampled.seed = 42;
    StaggeredRun drawn = generateStaggered(**artifact, step_by_step, prompts(), staggered, {}, sampled);
    StaggeredRun drawn_ahead = generateStaggered(**artifact, ahead, prompts(), staggered, {}, sampled);
    EXPECT_EQ(drawn_ahead.tokens, drawn.tokens) << what << ", sampled";
    EXPECT_NE(drawn.tokens, expected.tokens) << what << ": sampling must not be greedy here";
    EXPECT_GT(drawn_ahead.taken, 30) << what << ", sampled";

    // To the artifact's max_seq_len (128): the step queued past the last
    // token stays inside the cache's pages and the captured graphs.
    StaggeredRun to_end = generateStaggered(**artifact, step_by_step, one, {500});
    StaggeredRun to_end_ahead = generateStaggered(**artifact, ahead, one, {500});
    ASSERT_EQ(to_end.tokens.size(), 1u);
    EXPECT_EQ(to_end.tokens[0].size(), 127u) << what;
    EXPECT_EQ(to_end_ahead.tokens, to_end.tokens) << what << ", to max_seq_len";
  }
}

// Rows that finish at different steps move up in the batch (the engine
// drops a finished row; the rows after it take its place) and each step has
// fewer rows than the one before: each row's logits at every step still
// match the CPU backend's for the same request, up to the row's first token
// that differs at a near-tie (its history differs after it), and so do the
// tokens the device draws (the argmax, step by step and with the decode
// lookahead) up to a near-tie of the CPU's logits. The goldens and the mode
// comparisons run rows that all stop together after a prefill of as many:
// the argmax's workspace, laid out by the launch's row count until run 199,
// lost rows' tokens only here.
TEST(CudaExecutorTest, RowsFinishingApartMatchTheCpuBackend) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model; // f32: the CPU backend's arithmetic to ~1e-5
  auto artifact = tinyArtifact(model, "tiny-cuda-staggered-f32.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  auto cpu_executor = cpu::CpuExecutor::create(**artifact, {});
  ASSERT_TRUE(cpu_executor.isOk()) << cpu_executor.status().toString();
  auto cuda_executor = CudaExecutor::create(**artifact, {});
  ASSERT_TRUE(cuda_executor.isOk()) << cuda_executor.status().toString();
  const std::vector<int32_t> staggered = {3, 40, 7, 25, 1};
  Generation cpu_run = runRequests(**cpu_executor, (*cpu_executor)->engineConfig(), prompts(), staggered, true);
  Generation cuda_run =
      runRequests(**cuda_executor, (*cuda_executor)->engineConfig(), prompts(), staggered, true);
  ASSERT_EQ(cpu_run.logits.size(), staggered.size());
  ASSERT_EQ(cuda_run.logits.size(), staggered.size());
  int64_t compared = 0;
  for (size_t r = 0; r < staggered.size(); ++r) {
    const size_t steps = std::min(cpu_run.logits[r].size(), cuda_run.logits[r].size());
    for (size_t s = 0; s < steps; ++s) {
      double worst = 0.0;
      for (size_t v = 0; v < cpu_run.logits[r][s].size(); ++v)
        worst = std::max(worst, std::abs(double(cpu_run.logits[r][s][v]) - cuda_run.logits[r][s][v]));
      EXPECT_LE(worst, 1e-3) << "request " << r << ", token " << s;
      ++compared;
      if (cpu_run.tokens[r][s] != cuda_run.tokens[r][s])
        break; // a near-tie: the histories differ from here
    }
  }
  EXPECT_GT(compared, 60);

  for (bool lookahead : {false, true}) {
    CudaExecutorOptions options;
    options.decode_lookahead = lookahead;
    StaggeredRun drawn = generateStaggered(**artifact, options, prompts(), staggered);
    ASSERT_EQ(drawn.tokens.size(), staggered.size());
    int64_t equal = 0;
    for (size_t r = 0; r < staggered.size(); ++r)
      for (size_t s = 0; s < cpu_run.tokens[r].size() && s < drawn.tokens[r].size(); ++s) {
        std::vector<float> row = cpu_run.logits[r][s];
        std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
        if (row[0] - row[1] < 1e-3f)
          break; // a near-tie on the CPU: either token is right
        ASSERT_EQ(drawn.tokens[r][s], cpu_run.tokens[r][s])
            << "request " << r << ", token " << s << (lookahead ? ", with the lookahead" : ", step by step");
        ++equal;
      }
    EXPECT_GT(equal, 60) << (lookahead ? "with the lookahead" : "step by step");
  }
}

/// One sequence of `prompt`, greedy, 4 new tokens, on an executor with
/// trace_decode_steps: its last decode step's trace (empty on a failure,
/// which is reported).
std::vector<DecodeTraceEntry> lastDecodeTrace(const artifact::LoadedArtifact &artifact,
                                              const CudaExecutorOptions &options,
                                              const std::vector<int32_t> &prompt) {
  auto executor = CudaExecutor::create(artifact, options);
  EXPECT_TRUE(executor.isOk()) << executor.status().toString();
  if (!executor.isOk())
    return {};
  auto engine = engine::Engine::create(**executor, (*executor)->engineConfig());
  EXPECT_TRUE(engine.isOk()) << engine.status().toString();
  if (!engine.isOk())
    return {};
  engine::Request request;
  request.prompt_ids = prompt;
  request.sampling.max_new_tokens = 4;
  request.sampling.ignore_eos = true;
  auto results = (*engine)->generate({request});
  EXPECT_TRUE(results.isOk()) << results.status().toString();
  if (!results.isOk())
    return {};
  return (*executor)->lastDecodeTrace();
}

// staged_gemvs: the one-row GEMVs with their weights staged in shared memory
// (StagedGemv.cu, tensor-core dots in another order) run the same model as
// the register GEMVs, and the last decode step's trace shows them taken.
TEST(CudaExecutorTest, StagedGemvsRunTheSameModel) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model = groupOfTwoModel(2); // hidden 256, intermediate 512: K a multiple of 256
  auto artifact = tinyArtifact(model, "tiny-cuda-staged-gemvs.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  CudaExecutorOptions registers;
  registers.staged_gemvs = CudaExecutorOptions::StagedGemvs::kNone;
  const std::vector<std::vector<int32_t>> one{prompts()[2]};
  Generation reference = generate(**artifact, registers, true, {}, one);
  for (auto which : {CudaExecutorOptions::StagedGemvs::kQkv, CudaExecutorOptions::StagedGemvs::kAll}) {
    CudaExecutorOptions staged;
    staged.staged_gemvs = which;
    staged.trace_decode_steps = true;
    Generation with_staged = generate(**artifact, staged, true, {}, one);
    EXPECT_EQ(with_staged.tokens, reference.tokens);
    expectClose(with_staged, reference, 0.05, "staged GEMVs");

    int staged_launches = 0;
    for (const DecodeTraceEntry &e : lastDecodeTrace(**artifact, staged, one[0]))
      staged_launches += e.label.find("staged gemv") != std::string::npos;
    // Per layer the QKV alone, or also o_proj, gate/up and down.
    const bool all = which == CudaExecutorOptions::StagedGemvs::kAll;
    EXPECT_EQ(staged_launches, (all ? 4 : 1) * model.num_layers);
  }
}

// trace_decode_steps: the last decode step's GEMVs and decode attention
// (graph replay, labels from the capture) each carry four stamps in order,
// each one's wait releases after its predecessor's last block finished, and
// tracing changes no logit.
TEST(CudaExecutorTest, DecodeStepTraceStampsEveryKernelInOrder) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model = groupOfTwoModel(2);
  auto artifact = tinyArtifact(model, "tiny-cuda-step-trace.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  CudaExecutorOptions plain;
  CudaExecutorOptions traced;
  traced.trace_decode_steps = true;
  const std::vector<std::vector<int32_t>> one{prompts()[2]};
  Generation reference = generate(**artifact, plain, true, {}, one);
  Generation with_trace = generate(**artifact, traced, true, {}, one);
  EXPECT_EQ(with_trace.tokens, reference.tokens);
  expectClose(with_trace, reference, 0.0, "a traced step");

  // The same generation on an executor kept to read its last step.
  const std::vector<DecodeTraceEntry> trace = lastDecodeTrace(**artifact, traced, one[0]);
  ASSERT_FALSE(trace.empty());
  int gemvs = 0, attentions = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const DecodeTraceEntry &e = trace[i];
    SCOPED_TRACE(std::to_string(i) + " " + e.label);
    gemvs += e.label.find("gemv") != std::string::npos; // "/ gemv", "/ staged gemv"
    attentions += e.label.find("/ decode attention") != std::string::npos;
    ASSERT_FALSE(std::isnan(e.first_entry_us) || std::isnan(e.last_entry_us) ||
                 std::isnan(e.wait_release_us) || std::isnan(e.last_exit_us));
    // Blocks 0 and N-1 stand in for the first and last to start; the
    // globaltimer ticks about every microsecond on some GPUs.
    EXPECT_LE(e.first_entry_us, e.last_entry_us + 1.0);
    EXPECT_LE(e.first_entry_us, e.wait_release_us);
    EXPECT_LE(e.wait_release_us, e.last_exit_us);
    if (i > 0) // PDL: the wait releases once the kernel before has finished
      EXPECT_GE(e.wait_release_us, trace[i - 1].last_exit_us - 1.0);
  }
  EXPECT_EQ(attentions, model.num_layers);
  EXPECT_GE(gemvs, 4 * model.num_layers); // qkv, o_proj, gate/up, down; and the lm_head
  EXPECT_FALSE(summarizeDecodeTrace(trace).empty());
}

// attention_cluster_max_splits: 9-16 splits merged in one non-portable
// cluster against the same splits merged through global memory (the
// combine is the same code, so the logits agree to the bit). One sequence,
// chunks of one token and no graphs (a graph plans the splits for its
// context bucket), so a 9-token prompt decodes through 9 to 16 splits.
// Outside 2-16 the executor refuses it.
TEST(CudaExecutorTest, ClusterMergeOfUpTo16SplitsMatchesTheGlobalMerge) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model = groupOfTwoModel(2);
  auto artifact = tinyArtifact(model, "tiny-cuda-cluster16.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  CudaExecutorOptions portable;
  portable.use_cuda_graphs = false;
  portable.decode_split_min_tokens = 1;
  portable.decode_wide_cta = false; // the split kernel: its splits are what merges
  portable.attention_cluster_combine = true;
  CudaExecutorOptions wide = portable;
  wide.attention_cluster_max_splits = 16;
  const std::vector<std::vector<int32_t>> one{prompts()[2]};
  Generation reference = generate(**artifact, portable, true, {}, one);
  Generation with_wide = generate(**artifact, wide, true, {}, one);
  EXPECT_EQ(with_wide.tokens, reference.tokens);
  expectClose(with_wide, reference, 0.0, "splits merged in a cluster of up to 16");

  CudaExecutorOptions too_wide = portable;
  too_wide.attention_cluster_max_splits = 17;
  auto refused = CudaExecutor::create(**artifact, too_wide);
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find("attention_cluster_max_splits 17 is outside 2-16"),
            std::string::npos)
      << refused.status().toString();
}

// tune_decode_attention: every open set-up timed on the batch-1 graph, the
// fastest kept; what the options fix stays fixed; the tokens are the rule's
// (the split count may change the logits' rounding, not the argmax here).
TEST(CudaExecutorTest, DecodeAttentionTuningKeepsTheFastestSetup) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model = groupOfTwoModel(2);
  auto artifact = tinyArtifact(model, "tiny-cuda-tuning.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  CudaExecutorOptions rule;
  rule.decode_wide_cta = false; // the split kernel, whose merge and chunks are open
  Generation reference = generate(**artifact, rule, true);
  EXPECT_FALSE(reference.tuning.tuned);

  CudaExecutorOptions tuned = rule;
  tuned.tune_decode_attention = true;
  Generation with_tuning = generate(**artifact, tuned, true);
  ASSERT_TRUE(with_tuning.tuning.tuned);
  EXPECT_EQ(with_tuning.tuning.candidates, 16); // fold x merge x 4 chunk floors
  EXPECT_GT(with_tuning.tuning.chosen_ms, 0.0f);
  EXPECT_LE(with_tuning.tuning.chosen_ms, with_tuning.tuning.rule_ms);
  const DecodeAttentionSetup &chosen = with_tuning.tuning.chosen;
  EXPECT_EQ(with_tuning.decode_attention.rope_in_attention, chosen.rope_in_attention);
  EXPECT_EQ(with_tuning.decode_attention.cluster_combine, chosen.cluster_combine);
  EXPECT_EQ(with_tuning.decode_attention.split_min_tokens, chosen.split_min_tokens);
  EXPECT_TRUE(with_tuning.tuning.rule.rope_in_attention); // group 2: the rule folds
  EXPECT_EQ(with_tuning.tokens, reference.tokens);
  expectClose(with_tuning, reference, 0.05, "tuned decode attention set-up");

  CudaExecutorOptions fixed = tuned;
  fixed.rope_in_attention = false;
  fixed.decode_split_min_tokens = 32;
  Generation partly = generate(**artifact, fixed, true);
  ASSERT_TRUE(partly.tuning.tuned);
  EXPECT_EQ(partly.tuning.candidates, 2); // only the merge is open
  EXPECT_FALSE(partly.decode_attention.rope_in_attention);
  EXPECT_EQ(partly.decode_attention.split_min_tokens, 32);
}

// The decode attention set-up where the options leave it unset: by the
// query heads per KV head; what the options set is kept.
TEST(CudaExecutorTest, DecodeAttentionSetupFollowsTheGroupSizeUnlessSet) {
  CudaExecutorOptions unset;
  DecodeAttentionSetup qwen3 = decodeAttentionSetup(unset, 16, 8);
  EXPECT_TRUE(qwen3.rope_in_attention);
  EXPECT_TRUE(qwen3.cluster_combine);
  EXPECT_EQ(qwen3.split_min_tokens, 64);
  EXPECT_TRUE(qwen3.warm_fold);
  DecodeAttentionSetup llama = decodeAttentionSetup(unset, 32, 8);
  EXPECT_TRUE(llama.rope_in_attention);
  EXPECT_FALSE(llama.cluster_combine);
  EXPECT_EQ(llama.split_min_tokens, 16);
  EXPECT_FALSE(llama.warm_fold);
  CudaExecutorOptions set;
  set.rope_in_attention = false;
  set.attention_cluster_combine = true;
  set.decode_split_min_tokens = 16;
  DecodeAttentionSetup chosen = decodeAttentionSetup(set, 16, 8);
  EXPECT_FALSE(chosen.rope_in_attention);
  EXPECT_TRUE(chosen.cluster_combine);
  EXPECT_EQ(chosen.split_min_tokens, 16);
  chosen = decodeAttentionSetup(set, 32, 8);
  EXPECT_TRUE(chosen.cluster_combine);
}

TEST(CudaExecutorTest, OutOfGpuMemoryIsAClearErrorAndLeavesTheGpuUsable) {
  TXC_SKIP_WITHOUT_GPU();
  TinyModelOptions model;
  model.dtype = DType::kBF16;
  auto artifact = tinyArtifact(model, "tiny-cuda-oom.txm");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  CudaExecutorOptions huge;
  huge.num_kv_pages = 1 << 30; // 256 GiB of cache per layer
  auto executor = CudaExecutor::create(**artifact, huge);
  ASSERT_FALSE(executor.isOk());
  EXPECT_EQ(executor.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(executor.status().message().find("KV cache of layer 0"), std::string::npos)
      << executor.status().message();
  EXPECT_NE(executor.status().message().find("free"), std::string::npos)
      << executor.status().message();
  // Nothing leaked into the next user of the GPU.
  auto retry = CudaExecutor::create(**artifact, {});
  EXPECT_TRUE(retry.isOk()) << retry.status().toString();
}

} // namespace
} // namespace txc::cuda
