//===- CudaExecutor.h - Run an artifact's plan on one GPU -------*- C++ -*-===//
//
// The CUDA backend: runs the same plan as txc::cpu::CpuExecutor, launch by
// launch, on one sm_90 GPU. Weights are uploaded once at create(); the arena
// and the paged KV cache (per layer, pages of kv_page_size tokens laid out
// [2][page][kv_heads][head_dim], exactly as the CPU backend) live in device
// memory. Each step copies its inputs (token ids, positions, batch) in one
// transfer, enqueues every launch on one stream, and synchronises once, when
// the logits come back. GEMMs run on cuBLASLt (fp32 accumulation),
// attention on runtime/kernels (paged split-KV decode, prefill) with a
// simple any-dtype kernel as fallback, the rest on CudaKernels.h.
//
//   auto executor = CudaExecutor::create(**artifact, {});
//   auto engine = Engine::create(**executor, (*executor)->engineConfig());
//
// Only rank 0 of one plan runs: artifacts compiled with tensor_parallel > 1
// are refused.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_CUDAEXECUTOR_H
#define TXC_RUNTIME_BACKENDS_CUDA_CUDAEXECUTOR_H

#include "runtime/backends/cuda/StepTrace.h"
#include "txc/artifact/Artifact.h"
#include "txc/engine/Batch.h"
#include "txc/engine/Engine.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace txc::cuda {

/// One weight shape's GEMV configuration (Gemv.h's GemvConfig, spelled out
/// so this header stays free of the kernels'): warps per block 4 or 8,
/// 16-byte chunks in flight per lane 2, 4 or 8, and the warps per SM the K
/// split aims at (1-1024).
struct GemvShapeConfig {
  int64_t n = 0, k = 0; // weight rows and columns
  int warps_per_block = 8, unroll = 2, target_warps_per_sm = 16;
};

struct CudaExecutorOptions {
  int device = 0;
  /// Pages in each layer's cache; 0 = as many as kv_cache_budget_bytes
  /// holds over all layers, capped at what max_num_seqs sequences of
  /// max_seq_len tokens could use.
  int32_t num_kv_pages = 0;
  uint64_t kv_cache_budget_bytes = uint64_t{4} << 30;
  /// Off: every GEMM-free op uses the simple attention kernel (tests).
  bool use_attention_library = true;
  /// Off: every GEMM runs on cuBLASLt (tests compare the two paths).
  bool use_gemv = true;
  /// GEMMs of more rows than the GEMV takes, up to skinnyGemmRowLimit(k),
  /// on SkinnyGemm.cu (tensor cores, epilogues fused) instead of cuBLASLt:
  /// Qwen3-0.6B b4 1.53 ms per step against 1.66 on the H200.
  bool use_skinny_gemm = true;
  /// Decode GEMMs beyond the skinny GEMM's rows (up to 64) on DecodeGemm.cu
  /// (wgmma, a cp.async ring, stream-K, epilogues fused) instead of
  /// cuBLASLt. Off: slower in the step (device runs 30 and 33: Llama-3-8B
  /// b32 6.03 against 5.31 ms, Qwen3-0.6B b32 1.80 against 1.51), ~2.9 TB/s
  /// chained against cuBLASLt's ~3.2 in the model.
  bool decode_gemm = false;
  /// GEMV configurations by weight shape instead of gemvConfigFor's (one
  /// row, bf16): for ranking them in the model's step, where they can rank
  /// otherwise than alone (bench/RUNLOG.md, device run 58).
  std::vector<GemvShapeConfig> gemv_configs;
  /// A cap on the rows a GEMM may have to run on the GEMV (for comparisons);
  /// below it Gemv.h's gemvRowLimit(k) decides (2 rows for k <= 3072, else 1).
  int64_t gemv_max_rows = 2;
  /// Non-greedy rows sampled on the GPU (Sampler.cu) instead of copying
  /// their logits rows to the host and sampling there (12x faster at batch
  /// 32 on the H200); greedy rows always take the argmax on the GPU.
  bool device_sampling = true;
  /// create() runs throwaway prefill and decode steps, so kernel module
  /// loading and cuBLASLt's algorithm choice happen at startup and not in
  /// the first request's time to first token.
  bool warm_up = true;
  /// With warm_up: also capture the decode graph of every (batch bucket,
  /// context bucket) at startup, so no request's step pays for a capture
  /// (batch-32 runs 15-31 ms shorter on the H200).
  bool capture_graphs_at_start = true;
  /// Decode-sized rms_norm launches whose result only the next GEMM reads
  /// are folded into that GEMV (the squares summed in its pass over x, the
  /// inverse RMS scaling its dot): -0.13 ms per Qwen3-0.6B step on the
  /// H200. (A first version with a separate inverse-RMS pass was slower.)
  bool fuse_norms = true;
  /// Decode-sized QKV GEMVs finish each head themselves (q/k-norm, rotary,
  /// KV append in the last block of the head to finish), so the step has no
  /// rope launch. Off: it never measured faster than the rope kernel in five
  /// runs on the H200, and with the swept GEMV configuration it costs
  /// Llama-3-8B 0.07 ms per step (device run 20: 4.84 against 4.77 ms;
  /// Qwen3-0.6B 0.919 against 0.917).
  bool fuse_rope = false;
  /// Decode steps run no rope kernel: the decode attention (tensor-core
  /// kernel, GQA group >= 2) applies q/k-norm and rotary itself and
  /// appends the newest K/V (attention/rope.cuh, the rope kernel's
  /// arithmetic; bit-identical). Unset: decodeAttentionSetup decides.
  std::optional<bool> rope_in_attention;
  /// The GEMV, norm and rope kernels launch with programmatic dependent
  /// launch, so each one's blocks start while its predecessor finishes.
  bool use_pdl = true;
  /// Shared-memory carveouts (percent of each SM's unified L1 and shared
  /// memory; -1: the driver's choice per kernel) that the decode step's
  /// GEMVs ask for: the QKV projection's, every other one's, and the decode
  /// attention's. The driver gives a GEMV little shared memory and the
  /// attention 100 KB, and an SM changes its carveout only when idle, so
  /// the attention's blocks cannot start beside the QKV GEMV's tail.
  /// The decode attention with one stage of K/V (DecodeParams::
  /// single_kv_stage, ~45 KB at d128 instead of ~105 KB, at the carveout one CTA needs)
  /// where the step's chunks fit one tile and its CTAs one wave. Behind PDL
  /// an SM keeps the attention's carveout for the GEMVs after it; at the
  /// driver's choice for the pipelined kernel (nearly all of the L1 given
  /// to shared memory) o_proj and down ran 2 and 5 us slower a Llama-3-8B
  /// layer (device run 63); Llama b1 4.56 -> 4.45 ms with it (run 64).
  bool decode_single_kv_stage = true;
  /// The decode attention as one wide CTA a (sequence, kv head)
  /// (kernels::DecodeParams::wide_cta: 16 warps, a 256-key tile, no split
  /// merge) where the planned context is at most 256 keys and those CTAs fit
  /// one wave; head_dim <= 128, GQA group >= 2, no window or soft-cap.
  /// Device run 75, b1 at the standard set-up: Llama-3-8B 4.463 -> 4.422
  /// ms, Qwen3-0.6B 0.761 -> 0.720 (the attention's time after its wait
  /// 9.6 -> 6.6 and 8.5 -> 6.5 us a layer); run 76, b8: 5.208 -> 4.742 and
  /// 1.364 -> 1.139. (Batches 9-16, which also fit one wave, unmeasured.)
  bool decode_wide_cta = true;
  /// The longest planned context (the decode graph's context bucket) that
  /// takes the wide CTA: 256 is one tile (kernels::kDecodeWideTileKeys);
  /// past it the CTA runs its tiles one after another, each loaded after the
  /// one before is done, against the split kernel's merge (for comparison:
  /// unmeasured in the model).
  int64_t decode_wide_cta_max_keys = 256;
  int qkv_carveout_percent = -1;
  int gemv_carveout_percent = -1;
  int attention_carveout_percent = -1;
  /// The decode attention kernel launched with PDL too (it waits first
  /// thing); -0.01 ms per Qwen3-0.6B step on the H200.
  bool attention_pdl = true;
  /// With attention_pdl: decode attention reads the older keys' K/V before
  /// its wait, so they stream while the QKV kernel drains (only the newest
  /// key comes from it). Bit-identical; -0.03 ms per step on both shapes
  /// at batch 1 on the H200.
  bool attention_early_kv = true;
  /// With attention_pdl: when the decode attention lets the next kernel
  /// launch (DecodeParams::dependents): at its start, after its wait, or
  /// after its keys (before the split merge). After the keys: device runs 99
  /// and 134, even to a loss (the attention faster, o_proj slower: its
  /// weights late); after the wait: run 187, +0.034 ms a Qwen3-0.6B step
  /// (o_proj's and gate/up's loads then land on the attention's chain).
  enum class AttentionDependents { kAtStart, kAfterWait, kAfterTiles };
  AttentionDependents attention_dependents = AttentionDependents::kAtStart;
  /// Diagnostic (DecodeParams::diagnostic_fold_passes): the decode
  /// attention's folded q/k-norm and rotary computed this many times a
  /// head, the last kept; bit-identical, only slower.
  int attention_fold_passes = 1;
  /// The decode attention's folded rope also runs once before its wait as
  /// a dry pass, so the real one finds its instructions in the SM's cache
  /// (DecodeParams::warm_fold). Unset: decodeAttentionSetup decides.
  std::optional<bool> attention_warm_fold;
  /// With use_pdl: the GEMV right after the decode attention (o_proj) lets
  /// the next kernel launch only once its own wait has released, so the
  /// gate/up GEMV's weights do not stream while the attention runs
  /// (GemvArgs::late_dependents). For comparison: in device run 101 the
  /// attention took 1.0 us less a Qwen3 layer and gate/up 1.4 more (Qwen3
  /// +0.011 ms a step, Llama-3-8B even).
  bool gemv_after_attention_late_dependents = false;
  /// Which one-row GEMVs of at most staged_gemv_max_bytes of weights copy
  /// them into shared memory before their wait (StagedGemv.h) instead of
  /// streaming them through registers (Gemv.h): none, the QKV projection
  /// (the GEMV before the decode attention), or all. For comparison: on
  /// Qwen3-0.6B (device runs 106-109) every GEMV staged took 0.679 ms a
  /// step and the QKV alone 0.704, against 0.668 with none. Staged, a
  /// GEMV's blocks leave SMs free and the attention's wide CTAs start 6-8
  /// us early (its share 7.1 -> 5.2 us a layer), but the early copies take
  /// the DRAM from the kernel running then (with the QKV alone staged, the
  /// down projection before it 2.9 -> 3.9 us after its wait), and each
  /// staged GEMV's own time after its wait still grows with its weights.
  enum class StagedGemvs { kNone, kQkv, kAll };
  StagedGemvs staged_gemvs = StagedGemvs::kNone;
  /// 16 MB takes every layer GEMV of Qwen3-0.6B (gate/up 12.6 MB) and none
  /// of Llama-3-8B's (33 MB and more).
  int64_t staged_gemv_max_bytes = int64_t{16} << 20;
  /// Decode attention of 2-8 splits merges them in a thread-block cluster
  /// through distributed shared memory instead of partials in global memory,
  /// a fence and a counter (bit-identical), where the launch's clusters are
  /// resident at once (the launcher checks; device run 252). Unset:
  /// decodeAttentionSetup decides.
  std::optional<bool> attention_cluster_combine;
  /// The most splits the cluster merge takes, 2-16: 8 is the portable
  /// cluster size; above it the launch allows a non-portable one (the H200
  /// schedules 16). More splits merge through global memory. Not yet
  /// measured above 8 (attention_bench's "splits=16 cluster" rows time it).
  int attention_cluster_max_splits = 8;
  /// Split-KV decode uses at least this many splits where the chunks stay
  /// split_min_tokens long, also when the batch alone fills a wave (the
  /// split heuristic gives batch 32 of 8 KV heads one split, so each CTA
  /// walks the whole context). 1-32; not yet measured above 1.
  int decode_min_splits = 1;
  /// With warm_up: time every decode attention set-up the options leave
  /// open (rope fold, cluster merge, 8/16/32/64-token chunks) on the batch-1
  /// decode graph of a 256-token context at startup and keep the fastest,
  /// instead of decodeAttentionSetup's rule where one beats it by over 1%.
  /// Off: device run 30 found Llama-3-8B's better set-up (b1 4.635 -> 4.534
  /// ms), now the rule, and nothing for Qwen3-0.6B; startup pays 16 graph
  /// captures. With decode_wide_cta the 256-token context takes the wide CTA
  /// in every set-up, so only the fold differs there (to revisit: tune at a
  /// context past one wide tile, or only the fold).
  bool tune_decode_attention = false;
  /// cuBLASLt's decode-sized GEMMs (at most CublasGemm::kTuneMaxRows rows)
  /// on the fastest of the heuristic's first algorithms, timed per shape at
  /// startup, instead of its first: each decode graph's step runs once
  /// uncaptured before its capture, and each shape is timed there. Off:
  /// device run 44 measured Llama-3-8B's step of GEMMs at 32 rows 4.43 ->
  /// 4.39 ms (the lm_head 5-9% faster, gate/up 2% slower chained than timed
  /// alone), not worth the startup time.
  bool tune_gemms = false;
  /// Split-KV decode cuts a sequence's keys into chunks of at least this
  /// many tokens (every split costs a partial write and a merge); it only
  /// matters below ~1k tokens of context. 0: decodeAttentionSetup
  /// decides.
  int32_t decode_split_min_tokens = 0;
  /// Decode steps (one new token per sequence) replay a CUDA graph per
  /// batch-size bucket. Off with profile_launches (events per launch).
  bool use_cuda_graphs = true;
  /// A decode step on a graph whose tokens are drawn on the GPU (the argmax,
  /// or the sampler: device_sampling) queues the step after it before its
  /// tokens are read: the next batch predicted (the rows the engine says go
  /// on, RowSampling::goes_on, each one position on, its slot in a page it
  /// already holds), its token ids this step's draw on the GPU, its own
  /// drawn with the engine's next uniforms. The engine's next batch runs on
  /// that step when it matches (the same rows, with the tokens returned);
  /// otherwise (a stop token, an admission) the step is waited for and
  /// dropped (its cache writes are the predicted rows' own slots, rewritten
  /// by any later step before they are read). The GPU then never waits for
  /// the host between decode steps: the host's turn-around (7-8 us a step,
  /// device runs 192 and 193) overlaps the step in flight; Qwen3-0.6B b1
  /// -3 to -6 us a step on the H100 (runs 193, 198).
  bool decode_lookahead = true;
  /// Time every launch with CUDA events, for diagnosis (read back with
  /// launchProfile()). Each step is queued behind a ~20 ms spin kernel so
  /// the events time the GPU, not the host enqueueing launches one by one.
  bool profile_launches = false;
  /// For measurement only (the outputs are wrong): decode steps launch an
  /// empty PDL kernel where the decode attention (and its folded rope)
  /// would run, or nothing at all, so the step's time without it shows
  /// what the attention costs in the step, beside the GEMVs, rather than
  /// alone (bench/RUNLOG.md, session 11).
  /// Diagnostics: the GEMV, decode attention and ablation kernels of each
  /// decode step stamp when their first and last blocks start, when the
  /// first passes its PDL wait and when the last finishes (globaltimer);
  /// lastDecodeTrace() returns the last decode step's stamps.
  bool trace_decode_steps = false;
  enum class DecodeAttentionAblation { kNone, kEmptyKernel, kNoLaunch };
  DecodeAttentionAblation ablate_decode_attention = DecodeAttentionAblation::kNone;
  /// For measurement only (the outputs are wrong): decode steps skip the
  /// GEMM that reads the decode attention's output (the attention's output
  /// projection), so the step's time without it bounds what folding that
  /// projection into the attention's CTAs could gain (bench/RUNLOG.md,
  /// session 36).
  bool ablate_decode_out_proj = false;
};

/// Decode attention's set-up for short contexts, chosen by the query heads
/// per KV head where CudaExecutorOptions leaves it unset. Measured at batch
/// 1 on the H200 with 128-token prompts (device runs 24-26), against the
/// rope kernel, the global-memory merge and 32-token chunks:
/// - a group of 2 (Qwen3-0.6B): the rope folded in, the cluster merge and
///   chunks of at least 64 tokens (4 splits at a 256-token context) took
///   the step from 0.908 to 0.807 ms;
/// - a group of 4 (Llama-3-8B): the cluster merge and 64-token chunks were
///   slower (64-token chunks +0.245 ms, all three +0.088), 16-token chunks
///   (16 splits) faster, 4.764 against 4.624 ms; the rope fold at 16-token
///   chunks, which the startup tuner chose, faster again (device runs
///   30-31: b1 4.635 -> 4.534 ms, b32 5.323 -> 5.209), so every group folds.
/// Why the two groups want opposite split counts is not measured yet.
/// The fold's dry pass before the wait (DecodeParams::warm_fold), device
/// runs 129-130: a group of 2 -0.005 to -0.008 ms (its wide CTAs resident
/// ~3.5 us before their wait, after the QKV GEMV with K unsplit), a group
/// of 4 +0.006 (~1 us: the dry pass delays the real one). The group stands in for that
/// residency, which the executor cannot see at launch.
struct DecodeAttentionSetup {
  bool rope_in_attention = false;
  bool cluster_combine = false;
  int32_t split_min_tokens = 16;
  bool warm_fold = false;
  bool operator==(const DecodeAttentionSetup &o) const {
    return rope_in_attention == o.rope_in_attention && cluster_combine == o.cluster_combine &&
           split_min_tokens == o.split_min_tokens && warm_fold == o.warm_fold;
  }
};
DecodeAttentionSetup decodeAttentionSetup(const CudaExecutorOptions &options, int64_t heads,
                                          int64_t kv_heads);

/// What tune_decode_attention measured: the set-up it kept, and the batch-1
/// step time of it and of the rule's set-up (milliseconds, GPU).
struct DecodeAttentionTuning {
  bool tuned = false;
  DecodeAttentionSetup chosen, rule;
  int candidates = 0;
  float chosen_ms = 0, rule_ms = 0;
};

/// GPU time per op kind (GEMMs per weight shape), summed over the steps run
/// so far.
struct LaunchProfileEntry {
  std::string op;      // "txk.rms_norm", "txk.gemm 14336x4096", ...
  bool decode = false; // steps with one new token per sequence
  int64_t launches = 0;
  double total_ms = 0;
};

class CudaExecutor : public engine::StepExecutor {
public:
  /// Checks the GPU (present, sm_90) and the plan (known ops, KV geometry),
  /// uploads the weights and allocates arena, cache and workspaces.
  static StatusOr<std::unique_ptr<CudaExecutor>> create(const artifact::LoadedArtifact &artifact,
                                                        const CudaExecutorOptions &options = {});
  ~CudaExecutor() override;

  int32_t vocabSize() const override;
  Status execute(const engine::Batch &batch, float *logits) override;
  bool hasDeviceSampling() const override { return true; }
  Status executeSampled(const engine::Batch &batch,
                        const std::vector<engine::RowSampling> &sampling, int32_t *tokens) override;

  int32_t numKvPages() const;
  int32_t kvPageSize() const;
  engine::EngineConfig engineConfig() const;
  /// Milliseconds of GPU time the last execute() took (CUDA events).
  float lastStepMs() const;
  /// The decode attention set-up in use, and what tuning measured (if on).
  DecodeAttentionSetup decodeAttention() const;
  DecodeAttentionTuning decodeAttentionTuning() const;
  /// Decode graphs captured so far (one per batch and context bucket).
  int32_t decodeGraphCount() const;
  /// Decode steps that ran on the step queued ahead (decode_lookahead), and
  /// those queued ahead in all (the rest were dropped: the engine's batch
  /// differed, or was still to come when the run ended).
  int64_t decodeStepsRunAhead() const;
  int64_t decodeStepsQueuedAhead() const;
  /// Empty unless created with profile_launches.
  std::vector<LaunchProfileEntry> launchProfile() const;
  /// The last decode step's kernels, in launch order (trace_decode_steps).
  std::vector<DecodeTraceEntry> lastDecodeTrace() const;

  struct State;

private:
  explicit CudaExecutor(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

} // namespace txc::cuda

#endif // TXC_RUNTIME_BACKENDS_CUDA_CUDAEXECUTOR_H
