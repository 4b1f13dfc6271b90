//===- params.h - Parameter blocks of the attention kernels ---------------===//
//
// Plain structs shared by host code, nvcc-built kernels and NVRTC-built
// kernels, so this header includes nothing. Every pointer comes with explicit
// element strides; optional pointers are named maybe_*. The kernels move
// 16 bytes at a time: q, o, k, v and every stride must be 16-byte aligned.
//
//===----------------------------------------------------------------------===//
#pragma once

namespace txc::kernels {

/// GQA groups of at least this size decode on tensor cores (decode_mma.cuh);
/// below it the zero padding of the 16 MMA rows costs more than the CUDA-core
/// kernel (decode.cuh) spends. Shared by the launchers and the codegen.
constexpr int kMinGroupForMmaDecode = 2;

/// Keys a warp of the tensor-core decode kernel holds in a tile (an MMA's
/// N of two n8 tiles), and the keys of a tile: one per each of the CTA's
/// four warps. (A one-warp CTA, 16-key tiles in 28 KB, lost in the decode
/// step in every measurement, device runs 62-63: its split merge on one
/// warp is a chain of L2 round trips. Removed in session 13.)
constexpr int kDecodeMmaKeysPerWarp = 16;
constexpr int kDecodeMmaWarps = 4;
constexpr int kDecodeMmaTileKeys = kDecodeMmaKeysPerWarp * kDecodeMmaWarps;
/// The wide CTA (DecodeParams::wide_cta): 16 warps, so one CTA takes a
/// (sequence, kv head)'s 256 keys in one tile, without splits to merge.
constexpr int kDecodeWideWarps = 16;
constexpr int kDecodeWideTileKeys = kDecodeMmaKeysPerWarp * kDecodeWideWarps;

/// The most splits DecodeParams::cluster_combine merges in one cluster: 8 is
/// the portable cluster size, the default of DecodeParams::
/// cluster_max_splits; up to 16 where it opts into non-portable sizes.
constexpr int kPortableClusterSplits = 8;
constexpr int kMaxClusterSplits = 16;

/// Where the keys and values of sequence b, kv head h, token t live.
///
/// Paged (page_table != nullptr): token t of sequence b is row (t % page_size)
/// of page page_table[b * page_table_stride + t / page_size], so the element is
///   base + page * page_stride + h * head_stride + (t % page_size) * token_stride.
/// Both the "HND" layout [pages, kv_heads, page_size, d] and the "NHD" layout
/// [pages, page_size, kv_heads, d] are expressible with strides.
///
/// Contiguous (page_table == nullptr): a packed ragged batch, token t of
/// sequence b is row maybe_cu_seqlens_k[b] + t:
///   base + (cu_seqlens_k[b] + t) * token_stride + h * head_stride.
struct KVCacheView {
  const void *k = nullptr;
  const void *v = nullptr;
  const int *page_table = nullptr;
  long long page_table_stride = 0;
  long long page_stride = 0;
  long long head_stride = 0;
  long long token_stride = 0;
  int page_size = 0;       // a power of two; used when the kernel's kPageSize is 0
  int page_size_log2 = 0;  // log2(page_size)
  const int *maybe_cu_seqlens_k = nullptr; // contiguous layout only
  long long num_tokens = 0; // contiguous layout: rows of k and v (the prefill's TMA reads rows past it as zeros)
  // Paged layout: pages in the pool. The prefill's TMA reads a sequence's
  // last page whole, so its slots past the sequence must hold finite values
  // (masked keys get P = 0, which a NaN in V would still poison): zero the
  // pool when it is allocated.
  long long num_pages = 0;
};

/// A TMA descriptor: CUtensorMap's 128 opaque bytes, encoded on the host
/// (tma_descriptor.h), kept opaque here so kernel sources need no cuda.h.
struct alignas(64) TmaDescriptor {
  unsigned long long opaque[16];
};

/// Per-variant scalars. Which ones are read is decided by the Variant type.
struct VariantParams {
  float sm_scale = 1.f;       // softmax scale, usually 1/sqrt(head_dim)
  float sm_scale_log2 = 1.f;  // sm_scale * log2(e): logits are kept in base 2
  float softcap = 0.f;        // logit soft-cap: cap * tanh(logit / cap)
  int window_left = -1;       // keys older than query_pos - window_left are masked
};

/// One decode step: one query token per sequence, keys/values in the paged
/// cache (the current token already appended), query position = kv_len - 1.
struct DecodeParams {
  const void *q = nullptr; // [batch, qo_heads, head_dim]
  long long q_batch_stride = 0, q_head_stride = 0;
  void *o = nullptr; // [batch, qo_heads, head_dim]
  long long o_batch_stride = 0, o_head_stride = 0;
  KVCacheView kv;
  const int *kv_lens = nullptr; // [batch]
  int batch = 0, num_qo_heads = 0, num_kv_heads = 0;
  VariantParams variant;

  // Split-KV: each sequence's keys are cut into num_splits chunks; partial
  // outputs (normalized) and base-2 LSEs are merged by the combine step.
  int num_splits = 1;
  float *maybe_partial_o = nullptr;   // [num_splits, batch, qo_heads, head_dim]
  float *maybe_partial_lse = nullptr; // [num_splits, batch, qo_heads], base 2
  // When set, the last split to finish for a (sequence, kv head) merges the
  // partials itself and resets its counter, saving the combine launch.
  unsigned *maybe_split_counters = nullptr; // [batch, kv_heads], zero before first use
  // With 2..cluster_max_splits splits: the splits of a (sequence, kv head)
  // run as one thread-block cluster and merge through distributed shared
  // memory (no partials in global memory, no counter); the launcher sets the
  // cluster shape and clears this where the split count does not allow it.
  bool cluster_combine = false;
  // At most kMaxClusterSplits; beyond kPortableClusterSplits the launcher
  // allows a non-portable cluster size (the H100/H200 schedule 16).
  int cluster_max_splits = kPortableClusterSplits;
  float *maybe_lse = nullptr;               // [batch, qo_heads], natural log
  // Launch with programmatic dependent launch: the kernel's blocks start
  // while the previous kernel drains and wait (pdlWait) before reading.
  bool programmatic_launch = false;
  // With programmatic_launch: the K/V of every key but the newest, the page
  // table and kv_lens are read before the wait, so they stream while the
  // previous kernel drains. Only valid when that kernel writes nothing but
  // the query and the newest key's K/V (the decode step's QKV/rope kernel).
  bool kv_before_wait = false;
  // With programmatic_launch: when this CTA lets the next kernel launch.
  // At its start (the default) the next kernel's blocks (a GEMV loading
  // weights before its wait) become resident while the kernel before this
  // one drains; after this CTA's wait, only once that kernel is done, so
  // their loads do not share the DRAM with its tail; after its keys
  // (before the merge), only as this latency-bound kernel ends (device run
  // 51: an L2 prefetch under the attention made it slower).
  enum class Dependents : unsigned char { kAtStart, kAfterWait, kAfterTiles };
  Dependents dependents = Dependents::kAtStart;
  // >= 0: the shared-memory carveout the launch asks for (percent; see
  // launchKernelWithCarveout), to match the kernel before it.
  int carveout_percent = -1;
  // Diagnostics: the launch's step-trace slots (device_utils.cuh,
  // TraceSlot), or null. The tensor-core kernel stamps them.
  unsigned long long *maybe_trace = nullptr;
  // Diagnostic (the wide CTA's fold with full rotary): each warp computes
  // its head's q/k-norm and rotation this many times, the same
  // instructions each time, keeping only the last (bit-identical). Block
  // 0's "heads done" stamp then tells the first pass's time (cold
  // instruction and constant caches, data) from a warm one's.
  int diagnostic_fold_passes = 1;
  // Diagnostic (read by the host only): with num_splits > 1 and no split
  // counters, the splits' partials are written and the combine kernel is
  // not launched, so a timing tells the attention's time without its merge
  // (the output is left unwritten).
  bool diagnostic_skip_combine = false;
  // Diagnostic: the fused combine's count runs (each CTA's partial released,
  // the last CTA found) but the last CTA merges nothing, so a timing tells
  // the count's share of the merge from the loads and arithmetic after it
  // (the output is left unwritten).
  bool diagnostic_count_only = false;
  // The folded rope (maybe_rope_qkv, with kv_before_wait) runs once before
  // the wait as a dry pass (on whatever the QKV holds then, writing only
  // shared memory that the real pass overwrites), through the same
  // instructions as the real pass after it, so those find the SM's
  // instruction cache warm: the kernel is ~100 KB of code, run once a layer
  // on an SM that ran GEMVs since, and each first fetch is an L2 round trip
  // under their weight streams. Device runs 127-129: the fold's first pass
  // ~2.3K cycles, a warm one ~0.2K; with the dry pass block 0's heads were
  // done ~0.9K cycles sooner (Qwen3-0.6B -0.005 to -0.008 ms a step, runs
  // 129-130). Worth it only where the CTA is resident long enough before
  // its wait for the dry pass (Qwen3 ~3.5 us: yes; Llama-3-8B ~1 us:
  // +0.006 ms).
  bool warm_fold = false;
  // The tensor-core kernel with one stage of K/V in shared memory instead of
  // its pipeline (tiles then load and run one after another): for chunks of
  // one tile, as in the decode step at short contexts, where the pipeline's
  // stages are never filled. At d128 that is ~45 KB instead of ~105 KB,
  // which the SM holds at a carveout that leaves the GEMVs around it most
  // of the L1 (device run 63: behind PDL an SM keeps the attention's
  // carveout for the next kernels; at the driver's choice for a 105 KB
  // kernel, o_proj and down ran 2 and 5 us slower a Llama-3-8B layer). With
  // carveout_percent < 0 the launch asks for the carveout one CTA needs.
  // (Two stages where chunks are two tiles measured no better in the step
  // and slower alone, device run 66; at batch 1 and 32k keys two stages, at
  // ~73 KB three CTAs an SM, read 65% of copy against the pipeline's 81% on
  // an H200, though a read-only launch at that footprint reads 97%: run 226.)
  bool single_kv_stage = false;
  // The tensor-core kernel with kDecodeWideWarps warps and one stage of
  // kDecodeWideTileKeys keys (head_dim <= 128, no window or soft-cap):
  // one CTA a (sequence, kv head) takes a short context in one tile, so
  // there is no split merge, whose fence, counter and reloads were ~5 us
  // of a Llama-3-8B layer's attention in the b1 step (device run 74). The
  // executor uses it with one split; with more (a 256-key tile a split,
  // merged through global memory, not a cluster) it is attention_bench's
  // comparison at longer contexts. Implies single_kv_stage.
  bool wide_cta = false;

  // The decode step's rope folded in (the tensor-core kernel only, GQA
  // group >= 2): when maybe_rope_qkv is set, q is not read. Each CTA reads
  // its group's query heads raw from the QKV projection ([batch, (qo_heads
  // + 2 kv_heads) * head_dim], the cache's element type), applies q-norm and
  // rotary (attention/rope.cuh) into its shared memory; the CTA whose chunk
  // holds a sequence's newest key does k-norm and rotary on that key and
  // appends it and its value to the cache slot rope_slot_mapping[seq] (none
  // when < 0), which is where the paged view finds the newest key.
  const void *maybe_rope_qkv = nullptr;
  long long rope_qkv_batch_stride = 0;
  const int *rope_slot_mapping = nullptr; // [batch]
  // [batch][rope_half] (cos, sin) pairs, each sequence's rotary factors at
  // its position (ropeCosSin, attention scaling included), computed once a
  // step by its first kernel: computed in each CTA they were ~1 us of every
  // layer's attention (device runs 78-79).
  const float *rope_factors = nullptr;
  int rope_half = 0; // rotated pairs (rotary_dim / 2)
  const void *maybe_q_norm = nullptr;     // [head_dim], the cache's element type
  const void *maybe_k_norm = nullptr;
  float rope_norm_eps = 0.f;
};

/// Prefill / chunked prefill over a ragged batch: sequence b owns query rows
/// cu_seqlens_q[b] .. cu_seqlens_q[b+1] and kv_len(b) keys. Causal masks are
/// aligned bottom-right: query i of a sequence sits at key position
/// i + kv_len - q_len, which is what a cached prefix needs.
struct PrefillParams {
  const void *q = nullptr; // [total_q, qo_heads, head_dim]
  long long q_token_stride = 0, q_head_stride = 0;
  // Q's rows (its packed tokens, cu_seqlens_q[batch]), where the caller
  // knows them: the warp-specialized kernel may then read Q by TMA, rows
  // past the tensor as zeros. 0: unknown (Q by cp.async).
  long long num_q_tokens = 0;
  void *o = nullptr; // [total_q, qo_heads, head_dim]
  long long o_token_stride = 0, o_head_stride = 0;
  KVCacheView kv;
  const int *cu_seqlens_q = nullptr; // [batch + 1]
  const int *maybe_kv_lens = nullptr; // paged: keys per sequence; else from cu_seqlens_k
  float *maybe_lse = nullptr;         // [total_q, qo_heads], natural log
  int batch = 0, num_qo_heads = 0, num_kv_heads = 0;
  int max_seqlen_q = 0;
  VariantParams variant;
  // Filled by launchPrefill, not by callers: the warp-specialized kernel
  // loads K and V tiles with TMA through these, boxes of 64 columns by a
  // key block's rows (contiguous K/V, or pages that hold whole blocks).
  bool kv_by_tma = false;
  TmaDescriptor tma_k, tma_v;
  // Likewise O (64 columns by 64 query rows of one head) for the warp-
  // specialized kernel's epilogue at d64 and d128.
  bool o_by_tma = false;
  TmaDescriptor tma_o;
  // And Q, the same boxes over num_q_tokens rows: with the tiles overlapped
  // (full masks, TMA K/V) the producer loads each tile's Q with its first K
  // block; otherwise it asks the L2 for each tile's Q ahead of the
  // consumers' own copy.
  bool q_by_tma = false;
  TmaDescriptor tma_q;
  // Set by callers: off, the kernels without the overlap skip that L2
  // prefetch of Q (prefillPrefetchesQ; attention_bench's "[no q prefetch]"
  // rows measure it).
  bool q_l2_prefetch = true;
  // Set by callers (an experiment, off until measured: session 56 built it
  // and got no GPU): the warp-specialized kernel's second producer warp asks
  // the L2 for the CTA's first tile's Q and first K block as it starts
  // (attention_bench's "[first prefetch]" rows measure it).
  bool first_tile_l2_prefetch = false;

  // Stream-K tail (the warp-specialized kernel's persistent full-mask walk):
  // where the tiles leave a last partial round, its key blocks are shared
  // out evenly over the CTAs, a split tile's parts merged by the CTA that
  // holds its first step. Set by the caller only where every tile has the
  // same key blocks (equal q and kv lengths); the workspace holds
  // prefillTailWorkspaceFloats(sms) floats, the counters
  // prefillTailCounters(sms) zeroed unsigneds, left zeroed. Null: off.
  float *maybe_tail_workspace = nullptr;
  unsigned *maybe_tail_counters = nullptr;
  // Filled by launchPrefill: the tiles of the last partial round (0: none).
  int tail_tiles = 0;

  // Diagnostics (attention_bench's phase rows): with maybe_phase_trace set,
  // thread 0 of each consumer warpgroup of the warp-specialized kernel
  // records, for each of its CTA's first phase_trace_tiles tiles, clock64
  // at each PrefillPhase and the tile's key-block count, at
  // [((cta * phase_trace_tiles + tile) * kMaxPrefillConsumers + consumer) *
  // kPrefillTraceSlots + slot]. Null: one uniform test per phase.
  long long *maybe_phase_trace = nullptr;
  int phase_trace_tiles = 0;
};

/// The most consumer warpgroups a prefill CTA has (d64's three).
constexpr int kMaxPrefillConsumers = 3;

/// Sizes of PrefillParams' stream-K tail buffers for a device of `sms` SMs:
/// a partial state a CTA and consumer (O's fp32 accumulators, two row maxima
/// and two row sums a thread, thread-major), and a counter a tail tile and
/// consumer. kPrefillTailFloatsPerThread: the kernels with a tail (d128's
/// two consumers of 64 + 4 floats a thread, d64's three of 32 + 4).
constexpr int kPrefillTailFloatsPerThread = 2 * (128 / 2 + 4);
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define TXC_TAIL_SIZE_FN __host__ __device__ constexpr
#else
#define TXC_TAIL_SIZE_FN constexpr
#endif
TXC_TAIL_SIZE_FN long long prefillTailWorkspaceFloats(int sms) { return (long long)sms * kPrefillTailFloatsPerThread * 128; }
TXC_TAIL_SIZE_FN long long prefillTailCounters(int sms) { return (long long)sms * kMaxPrefillConsumers; }
#undef TXC_TAIL_SIZE_FN

/// The points of a consumer's tile that maybe_phase_trace stamps: the top of
/// the tile, its Q in shared memory, the first step's softmax done, the
/// main loop done (every Q K^T issued), the last P V done, the next tile
/// found and its Q load issued, the epilogue done (O stored); then the
/// tile's key-block count; for a stream-K tail part, the point its state was
/// stored and counted (a part without step 0) or the others' merged (the
/// owner), and its role: 1 a part without step 0, 2 + merges the owner (0: a
/// whole tile); with the tiles overlapped, the next tile found (after the
/// first step), the last step's start, and O's store issued (before the
/// next tile's first softmax, which the epilogue point includes).
enum PrefillPhase {
  kPhaseTileStart = 0,
  kPhaseQReady,
  kPhaseFirstStep,
  kPhaseMainLoop,
  kPhaseLastPV,
  kPhaseNextQIssued,
  kPhaseEpilogue,
  kPhaseKeyBlocks,
  kPhaseTailMerged,
  kPhaseTailRole,
  kPhaseNextFound,
  kPhaseLastStep,
  kPhaseOStored,
  kPrefillTraceSlots
};

} // namespace txc::kernels
