//===- decode_mma.cuh - Tensor-core paged decode for GQA ------------------===//
//
// Decode for GQA groups of 2..16 query heads. On the H200 the CUDA-core
// decode (decode.cuh) is issue-bound at group 4: each key costs about 96 warp
// instructions (q.k and p.v FMAs, lane reductions) while the memory system
// delivers a key every 32 cycles per SM, so it stalls near half of the copy
// bandwidth. Here the group's query heads are packed as the M rows of an
// m16n8k16 MMA (rows past the group are zero), so a 16-key slice costs about
// 35 warp instructions.
//
// Grid: (split, kv_head, sequence), 4 warps (16 and one stage for
// DecodeParams::wide_cta). K/V tiles of kBlockN keys are
// gathered row by row from the paged cache with cp.async into XOR-swizzled
// shared memory, kStages deep; each warp owns 16 keys of every tile and keeps
// its own online-softmax state; states merge through shared memory in
// decodeEpilogue (shared with decode.cuh), which also writes split partials
// and runs the fused combine. With DecodeParams::maybe_rope_qkv the decode
// step's rope is folded in (foldRope): no rope kernel runs before it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "attention/decode.cuh"
#include "attention/prefill.cuh"
#include "attention/rope.cuh"

namespace txc::kernels {

/// Four warps, a 64-key tile per stage: about 100 KB of shared memory at
/// d128 for the pipeline, ~45 KB with DecodeParams::single_kv_stage. Wide
/// (kDecodeWideWarps, DecodeParams::wide_cta): one 256-key stage only,
/// ~137 KB at d128 and group 4.
template <typename DType_, int kHeadDim_, int kGroupSize_, int kPageSize_ = 0, int kWarps_ = kDecodeMmaWarps>
struct DecodeMmaTraits {
  using DType = DType_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kGroupSize = kGroupSize_;
  static constexpr int kPageSize = kPageSize_;
  static constexpr int kWarps = kWarps_;
  static constexpr bool kWide = kWarps > kDecodeMmaWarps;
  // What only this variant has the registers for: the wide CTA of groups
  // up to 4 (Qwen3's and Llama's decode step at short contexts) stays
  // spill-free with block 0's cycle stamps, the newest key's deferred cache
  // store (storeNewestKv) and warps past the chunk skipping the tile; the
  // 4-warp kernels and group 8's wide CTA sat at their limits (ptxas
  // spilled 8-36 bytes) before kKeysAsRows freed ~30 registers of them:
  // widening this is open (not measured).
  static constexpr bool kSpareRegisters = kWide && kGroupSize <= 4;
  // Groups up to 8 compute S^T = K Q^T and O^T = V^T P^T: the warp's 16
  // keys are the MMA's rows and the group's heads its columns, where
  // S = Q K^T pads the group to 16 rows. Half the MMAs and half the output
  // accumulators (32 registers a thread at d128, not 64), and Q^T's
  // fragments take 16 registers, not 32 (the wide CTA reloaded Q's from
  // shared memory each k-step for want of them). ptxas: the wide CTA 128
  // -> 118 registers, the 4-warp kernels at d128 166 -> 135, and the d256
  // and group-8 ones no longer spill (40-76 bytes before).
  static constexpr bool kKeysAsRows = kGroupSize <= 8;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRows = 16; // MMA M: the group's heads, zero-padded
  static constexpr int kBlockN = kDecodeMmaKeysPerWarp * kWarps;
  // About 64 KB of K/V in flight per CTA and two CTAs per SM.
  static constexpr int kStages = kHeadDim <= 64 ? 6 : (kHeadDim <= 128 ? 3 : 2);
  static constexpr int kChunksPerRow = kHeadDim / 8;
  static constexpr int kQElems = kRows * kHeadDim;
  static constexpr int kKVElems = kBlockN * kHeadDim;
  // Shared memory: Q, the folded rope's scratch (the group's query heads,
  // the key and the value as fp32, then the rotary factors and the q/k-norm
  // weights), then the stages, K and V of stage 0 first: a launch with
  // DecodeParams::single_kv_stage allocates only up to the end of stage 0.
  static constexpr int kFoldAuxFloats = 3 * kHeadDim;
  static constexpr int kFoldScratchBytes = ((kGroupSize + 2) * kHeadDim + kFoldAuxFloats) * 4;
  static constexpr int kStageOffsetBytes = kQElems * (int)sizeof(DType) + kFoldScratchBytes;
  static constexpr int kPipelineBytes = kStageOffsetBytes + 2 * kStages * kKVElems * (int)sizeof(DType);
  static constexpr int kSingleStageBytes = kStageOffsetBytes + 2 * kKVElems * (int)sizeof(DType);
  static constexpr int kMergeBytes = (kWarps * kGroupSize * (kHeadDim + 2)) * (int)sizeof(float);
  static constexpr int kSmemBytesSingleStage = kSingleStageBytes > kMergeBytes ? kSingleStageBytes : kMergeBytes;
  static constexpr int kSmemBytes =
      kWide ? kSmemBytesSingleStage : (kPipelineBytes > kMergeBytes ? kPipelineBytes : kMergeBytes);

  static_assert(sizeof(DType) == 2, "decode supports 16-bit element types");
  static_assert(kGroupSize >= 1 && kGroupSize <= kRows, "GQA group must fit the 16 MMA rows");
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "head_dim must be 64, 128 or 256");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory over the sm_90 limit");
  static_assert(kStages >= 2, "the prologue loads STAGES - 1 tiles");
  static_assert(2 * kThreads >= kHeadDim, "the folded rope takes one rotary pair a thread");
  static_assert(kWarps == kDecodeMmaWarps || (kWarps == kDecodeWideWarps && kHeadDim <= 128),
                "the wide CTA is built for head_dim <= 128");
};

/// Block 0's cycle stamps (traceBlock0Clock), where registers allow
/// (DecodeMmaTraits::kSpareRegisters).
template <class Traits> __device__ __forceinline__ void stampBlock0(unsigned long long *trace, int point) {
  if constexpr (Traits::kSpareRegisters)
    traceBlock0Clock(trace, point);
}

/// One warp writes the newest key's K (`key`) or V, `head` as fp32, into its
/// cache slot rope_slot_mapping[seq]; padding rows (slot < 0) write none.
template <class Traits>
__device__ __forceinline__ void storeToCacheSlot(const DecodeParams &params, const float *head, bool key, int kv_head,
                                                 int seq, int lane) {
  using T = typename Traits::DType;
  const int slot = params.rope_slot_mapping[seq];
  if (slot < 0)
    return;
  const KVCacheView &kv = params.kv;
  const long long page = slot >> kv.page_size_log2, offset = slot & (kv.page_size - 1);
  T *dst = static_cast<T *>(const_cast<void *>(key ? kv.k : kv.v)) + page * kv.page_stride +
           kv_head * kv.head_stride + offset * kv.token_stride;
  // Rolled on purpose: storeNewestKv runs it beside the output accumulators,
  // and unrolled it spilled the wide CTA (8 bytes); it is off the critical
  // path there.
  for (int i = lane; i < Traits::kHeadDim; i += 32)
    dst[i] = ElementOps<T>::fromFloat(head[i]);
}

/// The cache write foldRope leaves when it staged the newest key (in
/// kernels with DecodeMmaTraits::kSpareRegisters): the last
/// two warps store K and V from the fold's scratch (`heads`, rows G and
/// G + 1) once their tiles are done, before the merge reuses that memory.
/// In the fold the stores held its closing barrier while the next kernels'
/// weights streamed: with this and the padded rows zeroed before the wait,
/// the fold after its loads took 2.7K cycles against 3.3K (device runs 99
/// and 100, block 0 on Qwen3-0.6B); the rest is one warp's q-norm and
/// rotary.
template <class Traits>
__device__ __forceinline__ void storeNewestKv(const DecodeParams &params, const float *heads, int kv_head, int seq) {
  constexpr int G = Traits::kGroupSize, D = Traits::kHeadDim, W = Traits::kWarps;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= W - 2) {
    const bool key = warp == W - 2;
    storeToCacheSlot<Traits>(params, heads + (key ? G : G + 1) * D, key, kv_head, seq, lane);
  }
}

/// DecodeParams::maybe_rope_qkv, after the wait: the CTA's query heads
/// (q-norm, rotary) into smem_q (the caller zeroed the rows past the group
/// before, as loadQ leaves them); if the CTA holds the newest key (`owner`),
/// that key (k-norm, rotary) and its value into their cache slot. When the
/// newest key lies in a tile of the prologue, they also go straight into
/// row `staged_row` of that tile's stage (`stage_k`, `stage_v`; the tile's
/// loads skipped it), and with kSpareRegisters the cache slot waits for
/// storeNewestKv after the tiles (they stay in `heads`); otherwise a later
/// cp.async reads them back from the cache, so the write is fenced.
///
/// This runs on the step's critical path (the attention's own time after
/// the QKV GEMV ends), so every global load is issued at once, by all
/// threads, before any is used: one L2 round trip, not one per head a warp
/// (before device run 63). `heads` holds (kGroupSize + 2) * kHeadDim floats,
/// `aux` (kFoldAuxFloats) the rotary factors, written by the caller before
/// the wait (this function's first barrier orders them), then the q- and
/// k-norm weights: the kernel's fold scratch.
template <class Traits>
__device__ __forceinline__ void foldRope(const DecodeParams &params, typename Traits::DType *smem_q,
                                         typename Traits::DType *stage_k, typename Traits::DType *stage_v,
                                         float *heads, float *aux, int kv_head, int seq, bool owner,
                                         int staged_row, bool dry) {
  using T = typename Traits::DType;
  using Ops = ElementOps<T>;
  constexpr int G = Traits::kGroupSize, D = Traits::kHeadDim, CPR = Traits::kChunksPerRow;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const T *qkv = static_cast<const T *>(params.maybe_rope_qkv) + seq * params.rope_qkv_batch_stride;
  const T *q_norm = static_cast<const T *>(params.maybe_q_norm);
  const T *k_norm = static_cast<const T *>(params.maybe_k_norm);
  const float *cos_sin = aux;
  float *q_norm_staged = aux + D, *k_norm_staged = aux + 2 * D;
  const int count = G + (owner ? 2 : 0);
  // Staged row j: j < G query head kv_head * G + j, j = G the key, G + 1
  // the value, G + 2 the q-norm weights, G + 3 the k-norm weights.
  auto rowSource = [&](int j) -> const T * {
    if (j < G)
      return qkv + (long long)(kv_head * G + j) * D;
    if (j < count)
      return qkv + (long long)(params.num_qo_heads + (j - G) * params.num_kv_heads + kv_head) * D;
    return j == G + 2 ? q_norm : k_norm;
  };
  auto rowTarget = [&](int j) { return j < G + 2 ? heads + j * D : (j == G + 2 ? q_norm_staged : k_norm_staged); };
  auto rowLoaded = [&](int j) { return j < count || (j >= G + 2 && rowSource(j) != nullptr); };
  constexpr int kChunks = (G + 4) * CPR;
  constexpr int kPerThread = (kChunks + Traits::kThreads - 1) / Traits::kThreads;
  uint4 staged[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int idx = threadIdx.x + i * Traits::kThreads, j = idx / CPR, c = idx % CPR;
    if (idx < kChunks && rowLoaded(j)) // through the L2: a dry pass must leave no line in L1
      staged[i] = __ldcg(reinterpret_cast<const uint4 *>(rowSource(j) + c * 8));
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int idx = threadIdx.x + i * Traits::kThreads, j = idx / CPR, c = idx % CPR;
    if (idx < kChunks && rowLoaded(j)) {
      float *dst = rowTarget(j) + c * 8;
      const unsigned words[4] = {staged[i].x, staged[i].y, staged[i].z, staged[i].w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const float2 f = Ops::toFloat2(words[w]);
        dst[2 * w] = f.x;
        dst[2 * w + 1] = f.y;
      }
    }
  }
  __syncthreads();
  stampBlock0<Traits>(params.maybe_trace, kBlock0FoldLoaded);

  auto cosSin = [&](int i, float &c, float &s) {
    c = cos_sin[2 * i];
    s = cos_sin[2 * i + 1];
  };
  for (int j = warp; j < count; j += Traits::kWarps) {
    float *head = heads + j * D;
    if constexpr (Traits::kSpareRegisters) {
      const float *norm = j < G ? q_norm_staged : k_norm_staged;
      const bool normed = (j < G ? q_norm : k_norm) != nullptr;
      // The head in registers (HeadInRegisters): one batch of shared-memory
      // loads, the arithmetic, one batch of stores. The key goes back to
      // `heads` too, where storeNewestKv reads it after the closing
      // barrier. The 4-warp kernels at d64 and d256 spilled 4-76 bytes with
      // it, so they keep the staged head below (the same arithmetic).
      HeadInRegisters<D> h;
      // Passes before the last (DecodeParams::diagnostic_fold_passes) run
      // the same instructions and keep nothing: `head` is read, not written.
      const bool whole = 2 * params.rope_half == D;
#pragma unroll 1
      for (int pass = whole ? params.diagnostic_fold_passes : 1; pass > 0; --pass) {
        h.load(head, lane);
        if (j <= G) {
          if (normed)
            h.rmsNorm(params.rope_norm_eps, [&](int i) { return norm[i]; }, lane);
          if (whole) {
            h.rotateWhole(cosSin, lane);
          } else { // partial rotary: pairs half a rotary span apart, across lanes
            h.store(head, lane);
            __syncwarp();
            rotateStagedHead(head, params.rope_half, cosSin, lane);
            h.load(head, lane);
          }
        }
      }
      if (j == G)
        h.store(head, lane);
      // Query head j into row j of Q; the key and value into the stage row.
      T *dst = j < G ? smem_q : (j == G ? stage_k : stage_v);
      const int r = j < G ? j : staged_row;
      if (j < G || staged_row >= 0)
#pragma unroll
        for (int k = 0; k < D / 32; ++k) {
          const int i = lane + 32 * k;
          dst[swizzled<D>(r, i / 8) + i % 8] = Ops::fromFloat(h.x[k]);
        }
      if (!dry && j >= G && staged_row < 0)
        storeToCacheSlot<Traits>(params, head, j == G, kv_head, seq, lane);
    } else {
      if (j <= G) {
        if ((j < G ? q_norm : k_norm) != nullptr) {
          const float *norm = j < G ? q_norm_staged : k_norm_staged;
          rmsNormStagedHead(head, D, params.rope_norm_eps, [&](int i) { return norm[i]; }, lane);
        }
        rotateStagedHead(head, params.rope_half, cosSin, lane);
      }
      if (j < G) {
        for (int i = lane; i < D; i += 32)
          smem_q[swizzled<D>(j, i / 8) + i % 8] = Ops::fromFloat(head[i]);
      } else {
        if (staged_row >= 0) {
          T *stage = j == G ? stage_k : stage_v;
          for (int i = lane; i < D; i += 32)
            stage[swizzled<D>(staged_row, i / 8) + i % 8] = Ops::fromFloat(head[i]);
        }
        if (!dry)
          storeToCacheSlot<Traits>(params, head, j == G, kv_head, seq, lane);
      }
    }
  }
  stampBlock0<Traits>(params.maybe_trace, kBlock0FoldHeadsDone);
  if (owner && staged_row < 0)
    __threadfence();
  __syncthreads();
}

// The parameters __grid_constant__: read in place, not copied into
// registers (with them ptxas spilled 4 bytes of the wide CTA instead of 12
// before kKeysAsRows; none since).
// The wide CTA is one block an SM: told so, ptxas stops aiming at two (64
// registers a thread at 512 threads), which spilled the d64 wide kernels'
// main loops once the split merge became combineSplits (session 42).
template <class Traits, class Variant>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kWide ? 1 : 0)
    pagedDecodeMmaKernel(const __grid_constant__ DecodeParams params) {
  using T = typename Traits::DType;
  constexpr int G = Traits::kGroupSize, D = Traits::kHeadDim, BN = Traits::kBlockN;
  constexpr int CPR = Traits::kChunksPerRow, STAGES = Traits::kStages, W = Traits::kWarps;
  // Output accumulator tiles of 4 floats a thread: O (16 rows x 8 dims
  // each) or, with kKeysAsRows, O^T (16 dims x 8 heads each).
  constexpr int kOTiles = Traits::kKeysAsRows ? D / 16 : D / 8;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T *smem_q = reinterpret_cast<T *>(smem_raw);
  float *rope_scratch = reinterpret_cast<float *>(smem_raw + Traits::kQElems * sizeof(T));
  float *rope_cos_sin = rope_scratch + (G + 2) * D;
  // Stage s: K at stageK(s), V right after it.
  T *const stage_base = reinterpret_cast<T *>(smem_raw + Traits::kStageOffsetBytes);
  auto stageK = [&](int s) { return stage_base + 2 * s * Traits::kKVElems; };
  auto stageV = [&](int s) { return stage_base + (2 * s + 1) * Traits::kKVElems; };
  // One stage (DecodeParams::single_kv_stage): tiles load and run one after
  // another through stage 0; otherwise a STAGES-deep pipeline.
  const bool single = Traits::kWide || params.single_kv_stage;

  const int split = blockIdx.x, kv_head = blockIdx.y, seq = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = lane / 4, quad = lane % 4;
  if (params.dependents == DecodeParams::Dependents::kAtStart)
    pdlLaunchDependents();
  // Traced (a diagnostic), this kernel also stamps the latest over its
  // blocks of: start, wait release, query ready (mark A: after the folded
  // rope) and tiles done (mark B: before the epilogue and the combine).
  unsigned long long *const trace = params.maybe_trace;
  traceEntry(trace);
  traceLatest(trace, kTraceLatestEntry);
  // The query and the newest key's K/V come from the previous kernel; the
  // older keys, the page table and kv_lens do not (kv_before_wait).
  const bool early = params.kv_before_wait;
  auto waitForPredecessor = [&]() {
    pdlWait();
    if (params.dependents == DecodeParams::Dependents::kAfterWait)
      pdlLaunchDependents();
    traceWaitRelease(trace);
    stampBlock0<Traits>(trace, kBlock0WaitRelease);
    traceLatest(trace, kTraceLatestWaitRelease);
  };
  if (!early)
    waitForPredecessor();

  const int kv_len = params.kv_lens[seq];
  // The folded rope's factors of pair tid, loaded beside kv_len (a CTA
  // that starts after the QKV GEMV has ended has every load before its wait
  // on the step's critical path) and stored into the fold's scratch before
  // the wait.
  const bool rope = params.maybe_rope_qkv != nullptr;
  float2 rope_factor = make_float2(0.f, 0.f);
  if (rope && tid < params.rope_half)
    rope_factor = reinterpret_cast<const float2 *>(params.rope_factors)[seq * params.rope_half + tid];
  auto ropeFactors = [&]() {
    if (rope && tid < params.rope_half) {
      rope_cos_sin[2 * tid] = rope_factor.x;
      rope_cos_sin[2 * tid + 1] = rope_factor.y;
    }
  };
  const int key_begin = kv_len > 0 ? Variant::keyBegin(kv_len - 1, params.variant) : 0;
  const int chunk = ceilDiv(kv_len - key_begin, params.num_splits);
  const int chunk_begin = key_begin + split * chunk;
  const int chunk_end = min(kv_len, chunk_begin + chunk);
  const int num_tiles = chunk_end > chunk_begin ? ceilDiv(chunk_end - chunk_begin, BN) : 0;
  // The tiles loaded before the main loop: STAGES - 1, so the loop always
  // has a stage to load the next into, except where K/V go before the wait
  // and the whole chunk fits the stages: then all of it, so that nothing is
  // left to load after the wait (at b1 with 32 splits, contexts of 4097-6144
  // keys; b1 L4096 at 22 splits 9.2 -> 8.45 us back to back, run 289, and
  // even in the decode step at 32 splits, run 292).
  const int prologue_tiles = single ? 1 : (early && num_tiles <= STAGES ? STAGES : STAGES - 1);

  const T *q_base = static_cast<const T *>(params.q) + seq * params.q_batch_stride;
  auto loadQ = [&]() {
    for (int idx = tid; idx < Traits::kRows * CPR; idx += Traits::kThreads) {
      const int r = idx / CPR, c = idx % CPR;
      const bool valid = r < G;
      const T *src = q_base + (valid ? (kv_head * G + r) * params.q_head_stride + c * 8 : 0);
      cpAsync16(smem_q + swizzled<D>(r, c), src, valid);
    }
  };

  const KVCacheView &kv = params.kv;
  const T *k_base = static_cast<const T *>(kv.k) + kv_head * kv.head_stride;
  const T *v_base = static_cast<const T *>(kv.v) + kv_head * kv.head_stride;
  // A thread's rows of a tile: r = tid / CPR + i * kRowsPerPass.
  constexpr int kRowsPerPass = Traits::kThreads / CPR;
  constexpr int kTileRowsPerThread = BN / kRowsPerPass;
  static_assert(BN % kRowsPerPass == 0, "a tile's rows spread evenly over the threads");
  // The wide CTA's early tile: its page-table entries, loaded beside kv_len
  // where their keys do not depend on it (the first split of a variant
  // without a window starts at key 0; the executor runs the wide CTA as one
  // split). Before device run 82 they waited for kv_len: one more L2 round
  // trip before the wait of a CTA that starts late, and the wide CTA starts
  // as the QKV GEMV ends (it needs an SM of its own). Not in the 4-warp
  // kernel: there the CTAs of the other splits, whose chunks start where
  // kv_len says, set the wait.
  const bool pages_ahead =
      Traits::kWide && early && split == 0 && !Variant::kWindow && kv.page_table != nullptr;
  int prologue_pages[kTileRowsPerThread];
  if (pages_ahead) {
#pragma unroll
    for (int i = 0; i < kTileRowsPerThread; ++i)
      prologue_pages[i] = kvPageAhead<Traits::kPageSize>(kv, seq, tid / CPR + i * kRowsPerPass);
  }
  // Rows of keys in [tile * BN, ...) of the chunk; past chunk_end zeros; the
  // row of key `skip` is not written at all (the early path loads it after
  // the wait). With `pages_known` the rows' pages are prologue_pages.
  auto loadTile = [&](int tile, int stage, int skip = -1, bool pages_known = false) {
    T *sk = stageK(stage);
    T *sv = stageV(stage);
    const int c = tid % CPR;
    auto loadRow = [&](int r, int known_page, bool page_known) {
      const int key = chunk_begin + tile * BN + r;
      const bool valid = key < chunk_end;
      if (valid && key == skip)
        return;
      const long long row = valid ? (page_known ? kvRowOffsetInPage<Traits::kPageSize>(kv, known_page, key)
                                                : kvRowOffset<Traits::kPageSize>(kv, seq, key)) +
                                        c * 8
                                  : 0;
      cpAsync16(sk + swizzled<D>(r, c), k_base + row, valid);
      cpAsync16(sv + swizzled<D>(r, c), v_base + row, valid);
    };
    if (pages_known) { // unrolled fully: prologue_pages stay in registers
#pragma unroll
      for (int i = 0; i < kTileRowsPerThread; ++i)
        loadRow(tid / CPR + i * kRowsPerPass, prologue_pages[i], true);
    } else if (!Traits::kWide && kv.page_table != nullptr) {
      // The rows' page-table entries first, all asked for at once, then the
      // copies. Looked up row by row, each copy's address waited for its
      // entry before the next lookup went out (the SASS: the entry's load,
      // its use, the two cp.async, the next load): a tile's rows in series.
      // Not in the wide CTA, whose registers are at its limit (it batches
      // its prologue's entries already, prologue_pages).
      int pages[kTileRowsPerThread];
#pragma unroll
      for (int i = 0; i < kTileRowsPerThread; ++i) {
        const int key = chunk_begin + tile * BN + tid / CPR + i * kRowsPerPass;
        pages[i] = key < chunk_end ? kvPageAhead<Traits::kPageSize>(kv, seq, key) : 0;
      }
#pragma unroll
      for (int i = 0; i < kTileRowsPerThread; ++i)
        loadRow(tid / CPR + i * kRowsPerPass, pages[i], true);
    } else {
#pragma unroll
      for (int r = tid / CPR; r < BN; r += kRowsPerPass)
        loadRow(r, 0, false);
    }
  };

  // The newest key (its K/V come from the previous kernel): whether this
  // CTA holds it, and whether it lies in a tile of the prologue (the first
  // prologue_tiles, loaded before the main loop), whose loads skip it; the
  // folded rope writes it straight into that stage, or without the fold a
  // cp.async after the wait loads it.
  const int newest = kv_len - 1;
  const bool holds_newest = kv_len > 0 && newest >= chunk_begin && newest < chunk_end;
  const int newest_tile = holds_newest ? (newest - chunk_begin) / BN : -1;
  const bool newest_in_prologue = holds_newest && newest_tile < prologue_tiles;
  T *const newest_stage_k = stageK(newest_in_prologue ? newest_tile : 0);
  T *const newest_stage_v = stageV(newest_in_prologue ? newest_tile : 0);
  const int newest_row = (newest - chunk_begin) % BN;
  const int rope_staged_row = rope && newest_in_prologue ? newest_row : -1;

  // The folded rope writes the group's query rows after the wait; the rows
  // past the group are zero (as loadQ leaves them) before it.
  auto zeroPaddedQueryRows = [&]() {
    for (int idx = tid; idx < (Traits::kRows - G) * D; idx += Traits::kThreads) {
      const int r = G + idx / D, i = idx % D;
      smem_q[swizzled<D>(r, i / 8) + i % 8] = ElementOps<T>::fromFloat(0.f);
    }
  };
  if (early) {
    // The whole prologue before the wait, without the newest key: the
    // previous kernel may still be writing it (its cache lines are not
    // touched until after the wait). In the decode step the wait is the
    // attention's critical path, so every key it can have in flight by then
    // shortens it. Without the fold, one more group after the wait carries
    // the newest key and Q, and the first tile waits for every group.
    // STAGES groups, the last one empty unless the chunk fits the stages:
    // the loop's cpAsyncWait<STAGES - 2> then still finds tile t in the
    // groups it waits for.
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      if (s < num_tiles && s < prologue_tiles)
        loadTile(s, s, newest, pages_ahead && s == 0);
      cpAsyncCommit();
    }
    // The newest key's row offset: its page-table entry is not the previous
    // kernel's, so its round trip goes before the wait; after it, it would
    // precede the row's own load on the path to the first tile.
    long long newest_offset = 0;
    if (!rope && newest_in_prologue && tid < CPR)
      newest_offset = kvRowOffset<Traits::kPageSize>(kv, seq, newest) + tid * 8;
    ropeFactors();
    if (rope)
      zeroPaddedQueryRows();
    // DecodeParams::warm_fold: pass 0, before the wait, is the dry one.
#pragma unroll 1
    for (int pass = rope && params.warm_fold ? 0 : 1; pass < 2; ++pass) {
      if (pass == 1)
        waitForPredecessor();
      if (rope)
        foldRope<Traits>(params, smem_q, newest_stage_k, newest_stage_v, rope_scratch, rope_cos_sin, kv_head, seq,
                         holds_newest, rope_staged_row, pass == 0);
    }
    if (!rope) {
      if (newest_in_prologue && tid < CPR) {
        cpAsync16(newest_stage_k + swizzled<D>(newest_row, tid), k_base + newest_offset, true);
        cpAsync16(newest_stage_v + swizzled<D>(newest_row, tid), v_base + newest_offset, true);
      }
      loadQ();
      cpAsyncCommit();
    }
  } else {
    ropeFactors();
    if (rope) {
      zeroPaddedQueryRows();
      foldRope<Traits>(params, smem_q, newest_stage_k, newest_stage_v, rope_scratch, rope_cos_sin, kv_head, seq,
                       holds_newest, rope_staged_row, false);
    } else {
      loadQ();
    }
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < num_tiles && s < prologue_tiles)
        loadTile(s, s, rope_staged_row >= 0 ? newest : -1);
      cpAsyncCommit(); // the first group also carries Q
    }
  }
  // The early path without the fold committed Q after the prologue's tiles.
  const bool first_tile_waits_all = early && !rope;

  traceLatest(trace, kTraceLatestMarkA);
  stampBlock0<Traits>(trace, kBlock0QueryReady);

  float o_acc[kOTiles][4];
#pragma unroll
  for (int j = 0; j < kOTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      o_acc[j][e] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};
  // Q's MMA fragments stay in registers across tiles: with kKeysAsRows
  // Q^T's B operands (rows 0-7 of Q), else Q's A operands, which the wide
  // CTA (one tile, 128 registers a thread at 512 threads) reloads from
  // shared memory for each k-step instead, for want of registers.
  constexpr int kQFrags = Traits::kKeysAsRows ? D / 32 : (Traits::kWide ? 1 : D / 16);
  unsigned q_frag[kQFrags][4];
  const unsigned q_addr = smemAddress(smem_q);

  for (int tile = 0; tile < num_tiles; ++tile) {
    if (single || (tile == 0 && first_tile_waits_all))
      cpAsyncWait<0>();
    else
      cpAsyncWait<STAGES - 2>();
    // Before the barrier (since session 23's run 133): thread 0's copies of
    // the tile landed, apart from the other warps catching up.
    if (tile == 0)
      stampBlock0<Traits>(trace, kBlock0FirstTile);
    __syncthreads();
    if (!single && tile + STAGES - 1 < num_tiles && tile + STAGES - 1 >= prologue_tiles)
      loadTile(tile + STAGES - 1, (tile + STAGES - 1) % STAGES);
    cpAsyncCommit();
    if (!Traits::kWide && !Traits::kKeysAsRows && tile == 0) {
#pragma unroll
      for (int kk = 0; kk < kQFrags; ++kk)
        ldmatrixX4(q_frag[kk], q_addr + 2 * swizzled<D>(lane % 16, kk * 2 + lane / 16));
    }
    // Q^T as B operands, rows 0-7 of Q (the group, zero-padded): matrix i
    // of q_frag[kk2] is dims [8 (4 kk2 + i), + 8), so k-step kk takes
    // q_frag[kk / 2][2 (kk % 2)] and [+ 1].
    if (Traits::kKeysAsRows && tile == 0) {
#pragma unroll
      for (int kk2 = 0; kk2 < kQFrags; ++kk2)
        ldmatrixX4(q_frag[kk2], q_addr + 2 * swizzled<D>(lane % 8, kk2 * 4 + lane / 8));
    }

    const int stage = single ? 0 : tile % STAGES;
    const unsigned sk_addr = smemAddress(stageK(stage));
    const unsigned sv_addr = smemAddress(stageV(stage));
    const int warp_key0 = warp * 16;

    // A warp whose 16 keys all lie past the chunk (the wide CTA's 256-key
    // tile at a shorter context) adds nothing: its state stays empty, as
    // computing over masked keys leaves it, without the shared-memory reads
    // of K, V and Q that bound the tile's time (12 KB a warp). Only with
    // kSpareRegisters: the branch spilled the d256 and group-8 kernels.
    const int key0 = chunk_begin + tile * BN + warp_key0;
    if constexpr (Traits::kKeysAsRows) {
      if (!Traits::kSpareRegisters || key0 < chunk_end) {
        // S^T: thread (group, quad) holds keys key0 + group and + 8 (st[e],
        // st[2 + e]) of heads 2 quad + e. K is the A operand: matrix i of
        // the x4 load is keys + 8 (i % 2), dims + 8 (i / 2) of the k-step.
        float st[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          unsigned a[4];
          ldmatrixX4(a, sk_addr + 2 * swizzled<D>(warp_key0 + lane % 8 + ((lane / 8) % 2) * 8, kk * 2 + lane / 16));
          mma16816<T>(st, a, q_frag[kk / 2][2 * (kk % 2)], q_frag[kk / 2][2 * (kk % 2) + 1]);
        }
        // Per head, the online softmax over the warp's 16 keys: the keys
        // of one head lie across the 8 lanes of one quad.
        float p[4];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key_lo = key0 + group, key_hi = key_lo + 8;
          const float lo = key_lo < chunk_end ? Variant::logit(st[e], params.variant) : -INFINITY;
          const float hi = key_hi < chunk_end ? Variant::logit(st[2 + e], params.variant) : -INFINITY;
          float block_max = fmaxf(row_max[e], fmaxf(lo, hi));
          block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 4));
          block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 8));
          block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 16));
          float safe_max;
          const float rescale = onlineSoftmaxStep(row_max[e], row_sum[e], block_max, safe_max);
#pragma unroll
          for (int mt = 0; mt < kOTiles; ++mt) {
            o_acc[mt][e] *= rescale;
            o_acc[mt][2 + e] *= rescale;
          }
          p[e] = exp2f(lo - safe_max);
          p[2 + e] = exp2f(hi - safe_max);
          row_sum[e] += p[e] + p[2 + e];
        }
        // P^T (16 keys x 8 heads) as the B operand: each 8-key half of the
        // accumulator, transposed in registers.
        const unsigned p_lo = movmatrixTrans(ElementOps<T>::fromFloat2(p[0], p[1]));
        const unsigned p_hi = movmatrixTrans(ElementOps<T>::fromFloat2(p[2], p[3]));
        // O^T += V^T P^T: V^T is the A operand, loaded transposed; matrix i
        // is dims + 8 (i % 2), keys + 8 (i / 2) of the 16-dim tile mt.
#pragma unroll
        for (int mt = 0; mt < kOTiles; ++mt) {
          unsigned a[4];
          ldmatrixX4Trans(a, sv_addr + 2 * swizzled<D>(warp_key0 + lane % 8 + (lane / 16) * 8, mt * 2 + (lane / 8) % 2));
          mma16816<T>(o_acc[mt], a, p_lo, p_hi);
        }
      }
    } else if (!Traits::kSpareRegisters || key0 < chunk_end) {
      float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        unsigned b[4];
        ldmatrixX4(b, sk_addr + 2 * swizzled<D>(warp_key0 + lane % 8 + (lane / 16) * 8, kk * 2 + (lane / 8) % 2));
        if constexpr (Traits::kWide)
          ldmatrixX4(q_frag[0], q_addr + 2 * swizzled<D>(lane % 16, kk * 2 + lane / 16));
        const unsigned(&a)[4] = q_frag[Traits::kWide ? 0 : kk];
        mma16816<T>(s[0], a, b[0], b[1]);
        mma16816<T>(s[1], a, b[2], b[3]);
      }

#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + j * 8 + quad * 2 + (e & 1);
          s[j][e] = key < chunk_end ? Variant::logit(s[j][e], params.variant) : -INFINITY;
        }

#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float block_max = fmaxf(row_max[r], fmaxf(fmaxf(s[0][2 * r], s[0][2 * r + 1]), fmaxf(s[1][2 * r], s[1][2 * r + 1])));
        block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 1));
        block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 2));
        float safe_max;
        const float rescale = onlineSoftmaxStep(row_max[r], row_sum[r], block_max, safe_max);
#pragma unroll
        for (int j = 0; j < kOTiles; ++j) {
          o_acc[j][2 * r] *= rescale;
          o_acc[j][2 * r + 1] *= rescale;
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          s[j][2 * r] = exp2f(s[j][2 * r] - safe_max);
          s[j][2 * r + 1] = exp2f(s[j][2 * r + 1] - safe_max);
          row_sum[r] += s[j][2 * r] + s[j][2 * r + 1];
        }
      }

      unsigned p[4];
      p[0] = ElementOps<T>::fromFloat2(s[0][0], s[0][1]);
      p[1] = ElementOps<T>::fromFloat2(s[0][2], s[0][3]);
      p[2] = ElementOps<T>::fromFloat2(s[1][0], s[1][1]);
      p[3] = ElementOps<T>::fromFloat2(s[1][2], s[1][3]);
#pragma unroll
      for (int dd = 0; dd < D / 16; ++dd) {
        unsigned b[4];
        ldmatrixX4Trans(b, sv_addr + 2 * swizzled<D>(warp_key0 + lane % 8 + ((lane / 8) % 2) * 8, dd * 2 + lane / 16));
        mma16816<T>(o_acc[2 * dd], p, b[0], b[1]);
        mma16816<T>(o_acc[2 * dd + 1], p, b[2], b[3]);
      }
    }
    if (single && tile + 1 < num_tiles) {
      __syncthreads(); // every warp is done with stage 0
      loadTile(tile + 1, 0);
      cpAsyncCommit();
    }
  }

  stampBlock0<Traits>(trace, kBlock0TilesComputed);
  if constexpr (Traits::kSpareRegisters)
    if (rope_staged_row >= 0)
      storeNewestKv<Traits>(params, rope_scratch, kv_head, seq);
  if (params.dependents == DecodeParams::Dependents::kAfterTiles)
    pdlLaunchDependents();
  // Per-warp states to shared memory (the pipeline buffers are free now).
  cpAsyncWait<0>();
  __syncthreads();
  traceLatest(trace, kTraceLatestMarkB);
  stampBlock0<Traits>(trace, kBlock0TilesDone);
  float *warp_acc = reinterpret_cast<float *>(smem_raw); // [W][G][D]
  float *warp_m = warp_acc + W * G * D;                   // [W][G]
  float *warp_l = warp_m + W * G;                         // [W][G]
  if constexpr (Traits::kKeysAsRows) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float sum = row_sum[e];
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      sum += __shfl_xor_sync(0xffffffffu, sum, 8);
      sum += __shfl_xor_sync(0xffffffffu, sum, 16);
      const int head = quad * 2 + e;
      if (head < G) {
#pragma unroll
        for (int mt = 0; mt < kOTiles; ++mt) {
          warp_acc[(warp * G + head) * D + mt * 16 + group] = o_acc[mt][e];
          warp_acc[(warp * G + head) * D + mt * 16 + group + 8] = o_acc[mt][2 + e];
        }
        if (group == 0) {
          warp_m[warp * G + head] = row_max[e];
          warp_l[warp * G + head] = sum;
        }
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = row_sum[r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int row = group + r * 8;
      if (row < G) {
#pragma unroll
        for (int j = 0; j < kOTiles; ++j) {
          warp_acc[(warp * G + row) * D + j * 8 + quad * 2] = o_acc[j][2 * r];
          warp_acc[(warp * G + row) * D + j * 8 + quad * 2 + 1] = o_acc[j][2 * r + 1];
        }
        if (quad == 0) {
          warp_m[warp * G + row] = row_max[r];
          warp_l[warp * G + row] = sum;
        }
      }
    }
  }
  __syncthreads();
  stampBlock0<Traits>(trace, kBlock0StatesStored);
  // The merging CTA stages the splits' partials in the whole of its dynamic
  // shared memory (the per-warp states are merged before it loads them), or
  // where they do not fit, their weights.
  static_assert(Traits::kSmemBytesSingleStage >= kMaxMergedSplits * G * (int)sizeof(float),
                "the stage holds the split weights");
  decodeEpilogue<T, G, D, W, Traits::kThreads, Traits::kWide>(
      params, warp_acc, warp_m, warp_l, split, seq, kv_head, smem_raw,
      single ? Traits::kSmemBytesSingleStage : Traits::kSmemBytes);
  stampBlock0<Traits>(trace, kBlock0Exit);
  traceExit(trace);
}

} // namespace txc::kernels
