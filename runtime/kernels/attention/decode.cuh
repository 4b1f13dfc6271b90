//===- decode.cuh - Paged, GQA-aware, split-KV decode attention -----------===//
//
// One query token per sequence against its keys in the paged KV cache.
//
// Grid: (split, kv_head, sequence). A CTA streams one chunk of one sequence's
// keys for one kv head and serves all kGroupSize query heads of that kv head
// from the same K/V load, so the cache is read once per step (GQA-aware).
//
// Inside a warp, kLanesPerToken lanes share one token (16 bytes of K and V
// each), so one warp-wide load is fully coalesced and several tokens are in
// flight per warp. The next tile's K/V are loaded into registers before the
// current tile is computed (register double buffering): decode is bound by
// memory bandwidth, and that is what keeps enough bytes in flight.
//
// The online softmax runs in fp32, in base 2. Each token slot of each warp
// keeps its own (max, sum, acc) state; states are merged across slots with
// shuffles and across warps through shared memory. With num_splits > 1 the
// CTA writes a normalized partial output and its base-2 LSE; they are merged
// by combineSplitsKernel, or by the last CTA of the (sequence, kv head) when
// split counters are given.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "attention/variant.cuh"

namespace txc::kernels {

template <typename DType_, int kHeadDim_, int kGroupSize_, int kPageSize_ = 0, int kWarps_ = 4>
struct DecodeTraits {
  using DType = DType_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kGroupSize = kGroupSize_; // query heads per kv head
  static constexpr int kPageSize = kPageSize_;   // 0: read from KVCacheView at run time
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kVec = 16 / (int)sizeof(DType); // elements per 16-byte load
  static constexpr int kLanesPerToken = kHeadDim / kVec;
  static constexpr int kTokenSlots = 32 / kLanesPerToken;
  // Loads in flight per thread and buffer; fewer for big groups, whose query
  // and accumulator registers grow with kGroupSize.
  static constexpr int kUnroll = kGroupSize <= 2 ? 8 : (kGroupSize <= 4 ? 4 : (kGroupSize <= 8 ? 2 : 1));
  static constexpr int kTokensPerWarpIter = kTokenSlots * kUnroll;
  static constexpr int kTokensPerCtaIter = kTokensPerWarpIter * kWarps;
  static constexpr int kSmemFloats = kWarps * kGroupSize * (kHeadDim + 2);

  static_assert(sizeof(DType) == 2, "decode supports 16-bit element types");
  static_assert(kHeadDim % kVec == 0 && kLanesPerToken <= 32 && 32 % kLanesPerToken == 0,
                "head_dim must be a power of two between 8 and 256");
  static_assert(kGroupSize >= 1 && kGroupSize <= 16, "GQA group size must be in [1, 16]");
  static_assert(kPageSize == 0 || (kPageSize & (kPageSize - 1)) == 0, "page size must be a power of two");
  static_assert(kSmemFloats * 4 <= 48 * 1024, "merge buffer must fit static shared memory");
};

/// Merges the softmax state (m2, l2, acc2) into (m, l, acc); base-2 maxima.
template <int kN>
__device__ __forceinline__ void mergeSoftmaxState(float &m, float &l, float (&acc)[kN], float m2, float l2,
                                                  const float (&acc2)[kN]) {
  float m_new = fmaxf(m, m2);
  if (m_new == -INFINITY)
    return;
  float a = exp2f(m - m_new), b = exp2f(m2 - m_new);
  l = l * a + l2 * b;
#pragma unroll
  for (int i = 0; i < kN; ++i)
    acc[i] = acc[i] * a + acc2[i] * b;
  m = m_new;
}

/// The most splits a launch merges (fused or by combineSplitsKernel; more
/// than this means a launch the split heuristic never makes).
constexpr int kMaxMergedSplits = 128;

/// combineSplits' wait for partials that are not in flight.
struct NothingInFlight {
  __device__ void operator()() const {}
};

/// Merges the n (<= kMaxMergedSplits) split partials of the G heads of
/// (seq, kv_head) in one CTA and writes the output: load_lse(split, g) gives
/// a split's base-2 LSE, load_o4(split, g, quad) four of its normalized
/// output elements. Every split merge runs it (the staged, cluster and
/// global fused merges and combineSplitsKernel), so their outputs are
/// bitwise the same (test/gpu/run_all.sh compares them with --atol 0).
///
/// The weights first: a warp a head, four splits a lane, takes the max and
/// the sum of the splits' weights by shuffles and writes each normalized
/// weight to `weights` ([split][g] floats of shared memory; it may alias
/// where load_lse reads: a warp reads its head's LSEs into registers before
/// it writes that head's weights); then each thread's four dims are one
/// chain of FMAs over the splits in order, with no exp2, compare or branch
/// in it. The merge until session 42 computed every weight in all 32 lanes
/// of a head, one exp2 and a branch a split in a dependent chain: device run
/// 259 (H100, b1 L4096, 32 splits staged) measured the merger's arithmetic
/// at 4.3K cycles that way against 2.2K this way; the global merge at 64 /
/// 128 splits 22.5 / 35.5 -> 20.7 / 31.6 us a launch. Every weight goes to
/// shared memory: a version that recomputed them beside the FMA chains
/// where the partials come from global memory ran those merges 1.6-1.7x
/// slower (run 258). wait_for_partials runs between the two, before the
/// barrier that publishes the weights: the staged merge waits there for its
/// copies of the partial outputs, so that they land while the weights are
/// computed.
template <typename T, int G, int D, int kThreads, typename LoadLse, typename LoadO4,
          typename WaitForPartials = NothingInFlight>
__device__ __forceinline__ void combineSplits(const DecodeParams &params, int seq, int kv_head,
                                              int n, LoadLse load_lse, LoadO4 load_o4,
                                              float *weights,
                                              WaitForPartials wait_for_partials = {}) {
  static_assert(kThreads % 32 == 0, "the weights' shuffles take whole warps");
  using Ops = ElementOps<T>;
  constexpr int kQuads = D / 4, kWarps = kThreads / 32, kLaneSplits = kMaxMergedSplits / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int g = warp; g < G; g += kWarps) {
    float lse[kLaneSplits];
    float max_lse = -INFINITY;
#pragma unroll
    for (int i = 0; i < kLaneSplits; ++i) {
      const int sp = lane + 32 * i;
      lse[i] = sp < n ? load_lse(sp, g) : -INFINITY;
      max_lse = fmaxf(max_lse, lse[i]);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, offset));
    float weight[kLaneSplits], sum = 0.f;
#pragma unroll
    for (int i = 0; i < kLaneSplits; ++i) {
      weight[i] = lse[i] == -INFINITY ? 0.f : exp2f(lse[i] - max_lse);
      sum += weight[i];
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
    for (int i = 0; i < kLaneSplits; ++i)
      if (lane + 32 * i < n)
        weights[(lane + 32 * i) * G + g] = weight[i] * inv;
    if (lane == 0 && params.maybe_lse != nullptr) {
      const long long row = (long long)seq * params.num_qo_heads + kv_head * G + g;
      params.maybe_lse[row] = max_lse == -INFINITY ? -INFINITY : (max_lse + log2f(sum)) * kLn2;
    }
  }
  wait_for_partials(); // the staged merge's copies, in flight during the weights
  __syncthreads();     // every head's weights written (and the partials landed)
  for (int idx = threadIdx.x; idx < G * kQuads; idx += kThreads) {
    const int g = idx / kQuads, quad4 = idx % kQuads, head = kv_head * G + g;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    // kBatch splits' loads issued at once (one round trip from global or
    // another CTA's shared memory), then their FMAs in split order. (With
    // `#pragma unroll 8` on a plain loop instead, ptxas spilled the d64
    // kernels' main loops.)
    constexpr int kBatch = 8;
    for (int sp0 = 0; sp0 < n; sp0 += kBatch) {
      float w[kBatch];
      float4 part[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int sp = sp0 + b < n ? sp0 + b : n - 1;
        w[b] = sp0 + b < n ? weights[sp * G + g] : 0.f;
        part[b] = load_o4(sp, g, quad4);
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (sp0 + b < n) {
          acc.x = fmaf(w[b], part[b].x, acc.x);
          acc.y = fmaf(w[b], part[b].y, acc.y);
          acc.z = fmaf(w[b], part[b].z, acc.z);
          acc.w = fmaf(w[b], part[b].w, acc.w);
        }
      }
    }
    T *o = static_cast<T *>(params.o) + seq * params.o_batch_stride + head * params.o_head_stride +
           quad4 * 4;
    *reinterpret_cast<uint2 *>(o) =
        make_uint2(Ops::fromFloat2(acc.x, acc.y), Ops::fromFloat2(acc.z, acc.w));
  }
}

/// The fused combine's loads all at once: every split's partial output
/// (cp.async, 16 bytes a thread) and LSE into `stage`, then
/// combineSplits' arithmetic from shared memory. One L2 round trip where
/// the merge from global memory makes one per 8 splits (its loop's unroll), on
/// the step's critical path (device run 73: Llama-3-8B at 16 splits takes 6 us
/// from its last tile to its exit). False, with nothing loaded, where the
/// stage cannot hold num_splits partials. The weights are computed while
/// the outputs' copies land (combineSplits' wait_for_partials). Traced, the
/// merger stamps its loads issued, landed (thread 0's copies, after the
/// weights) and merged (traceMergerClock).
template <typename T, int G, int D, int kThreads>
__device__ __forceinline__ bool combineSplitsStaged(const DecodeParams &params, int seq,
                                                    int kv_head, void *stage, int stage_bytes) {
  constexpr int kQuads = D / 4;
  constexpr int kSplitBytes = (G * D + G) * (int)sizeof(float);
  constexpr int kLsePerThread = 4;
  const int n = params.num_splits;
  if (stage == nullptr || n * kSplitBytes > stage_bytes || n * G > kLsePerThread * kThreads)
    return false;
  float4 *staged_o = static_cast<float4 *>(stage);         // [split][g][quad]
  float *staged_lse = reinterpret_cast<float *>(staged_o + n * G * kQuads); // [split][g]
  const long long rows = (long long)params.batch * params.num_qo_heads;
  const long long head0 = (long long)seq * params.num_qo_heads + kv_head * G;
  // The LSEs first, into registers: the weights need only them, and they
  // come back ahead of the partial outputs' copies queued behind them, so
  // the weights are computed while the copies land. Device run 270 (H100,
  // graph + PDL + early K/V): the merger's knows -> merged 3.8K -> 3.5-3.8K
  // cycles at b1 L4096 (9.4 -> 9.3 us a launch), 6.5-7.0K -> 4.8-5.0K at
  // L32768 (49.1-49.3 -> 48.7-49.0 us).
  float lse[kLsePerThread];
#pragma unroll
  for (int i = 0; i < kLsePerThread; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < n * G)
      lse[i] = __ldcg(params.maybe_partial_lse + (c / G) * rows + head0 + c % G);
  }
  // A split's G heads are consecutive rows: G * kQuads consecutive float4,
  // one split's after another's `rows * kQuads` apart. The source steps by
  // that stride: a 64-bit product a copy (the split and its offset from a
  // runtime division) took ~18 instructions a cp.async in the SASS, the
  // merger's ~2K cycles from knowing it merges to its loads issued (device
  // run 254), one warp an SM sub-partition.
  constexpr int kSplitQuads = G * kQuads;
  const long long split_stride = rows * kQuads;
  const float4 *partial_o =
      reinterpret_cast<const float4 *>(params.maybe_partial_o) + head0 * kQuads;
  if constexpr (kSplitQuads % kThreads == 0) {
    // Whole splits a pass of the CTA: the same offsets in every split.
    const float4 *src = partial_o + threadIdx.x;
    float4 *dst = staged_o + threadIdx.x;
    for (int sp = 0; sp < n; ++sp, src += split_stride, dst += kSplitQuads)
#pragma unroll
      for (int r = 0; r < kSplitQuads; r += kThreads)
        cpAsync16(dst + r, src + r);
  } else {
    static_assert(kThreads % kSplitQuads == 0,
                  "a split's quads and the CTA's threads: one must divide the other (powers of two)");
    // Several splits a pass: each thread one offset, every kSplitsAPass-th split.
    constexpr int kSplitsAPass = kThreads / kSplitQuads;
    const int r = threadIdx.x % kSplitQuads;
    int sp = threadIdx.x / kSplitQuads;
    const float4 *src = partial_o + sp * split_stride + r;
    for (; sp < n; sp += kSplitsAPass, src += kSplitsAPass * split_stride)
      cpAsync16(staged_o + sp * kSplitQuads + r, src);
  }
  cpAsyncCommit();
  traceMergerClock(params.maybe_trace, seq, kv_head, kMergerIssued);
#pragma unroll
  for (int i = 0; i < kLsePerThread; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < n * G)
      staged_lse[c] = lse[i];
  }
  __syncthreads(); // the LSEs in shared memory; the outputs' copies still in flight
  combineSplits<T, G, D, kThreads>(
      params, seq, kv_head, n, [&](int sp, int g) { return staged_lse[sp * G + g]; },
      [&](int sp, int g, int quad4) { return staged_o[(sp * G + g) * kQuads + quad4]; },
      staged_lse, [&] {
        cpAsyncWait<0>();
        traceMergerClock(params.maybe_trace, seq, kv_head, kMergerLanded);
      });
  if (params.maybe_trace != nullptr) {
    __syncthreads();
    traceMergerClock(params.maybe_trace, seq, kv_head, kMergerMerged);
  }
  return true;
}

/// The fused combine: the CTA's partial is stored; the last CTA of this
/// (sequence, kv head) to count itself in merges all splits. Every thread
/// of the CTA calls it.
template <typename T, int G, int D, int kThreads>
__device__ __forceinline__ void mergeSplitsAsLastCta(const DecodeParams &params, int seq,
                                                     int kv_head, void *combine_stage,
                                                     int combine_stage_bytes) {
  const long long rows = (long long)params.batch * params.num_qo_heads;
  // One acquire-release add by thread 0 after the barrier orders the CTA's
  // partial stores before the count (the barrier puts them before it, and a
  // release is cumulative) and, in the last CTA, the other splits' partials
  // before its loads (its acquire, then the barrier), as cooperative groups'
  // grid sync does with its master thread's fence: no fence a thread.
  __shared__ bool is_last_split;
  __syncthreads();
  traceLatest(params.maybe_trace, kTraceLatestMarkC);
  unsigned *counter = params.maybe_split_counters + seq * params.num_kv_heads + kv_head;
  if (threadIdx.x == 0)
    is_last_split = atomicAddAcqRelGpu(counter, 1u) == (unsigned)params.num_splits - 1;
  __syncthreads();
  if (!is_last_split)
    return;
  if (params.diagnostic_count_only) {
    if (threadIdx.x == 0)
      *counter = 0;
    return;
  }
  traceLatest(params.maybe_trace, kTraceLatestMarkD);
  traceMergerClock(params.maybe_trace, seq, kv_head, kMergerKnows);
  if (!combineSplitsStaged<T, G, D, kThreads>(params, seq, kv_head, combine_stage,
                                              combine_stage_bytes)) {
    // From global memory, the weights in the stage (it holds n * G floats:
    // the kernels' static_asserts).
    const long long head0 = (long long)seq * params.num_qo_heads + kv_head * G;
    const float4 *partial_o = reinterpret_cast<const float4 *>(params.maybe_partial_o);
    combineSplits<T, G, D, kThreads>(
        params, seq, kv_head, params.num_splits,
        [&](int sp, int g) { return __ldcg(params.maybe_partial_lse + sp * rows + head0 + g); },
        [&](int sp, int g, int quad4) {
          return __ldcg(partial_o + ((sp * rows + head0 + g) * D) / 4 + quad4);
        },
        static_cast<float *>(combine_stage));
  }
  if (threadIdx.x == 0)
    *counter = 0; // ready for the next launch (and for CUDA graph replays)
}

/// Shared tail of the decode kernels: merges the per-warp softmax states held
/// in shared memory (acc [W][G][D], m and l [W][G], base-2 maxima), then writes
/// the output (one split), or the split's partial and, when split counters are
/// given, lets the last CTA of the (sequence, kv head) merge all splits; with
/// cluster_combine the partials stay in shared memory and the cluster's first
/// CTA merges them from there. `combine_stage` (combine_stage_bytes of
/// shared memory the caller no longer needs, or null) lets the last CTA load
/// every split at once (combineSplitsStaged). Traced, it stamps the latest
/// over blocks of mark C (this CTA's partial published: fenced, or in the
/// cluster's shared memory) and mark D (the merging CTA knows it merges).
/// kWideCta: no cluster merge (checkDecodeParams refuses one), so none is
/// compiled in.
template <typename T, int G, int D, int W, int kThreads, bool kWideCta = false>
__device__ __forceinline__ void decodeEpilogue(const DecodeParams &params, const float *warp_acc,
                                               const float *warp_m, const float *warp_l, int split,
                                               int seq, int kv_head, void *combine_stage = nullptr,
                                               int combine_stage_bytes = 0) {
  using Ops = ElementOps<T>;
  const long long rows = (long long)params.batch * params.num_qo_heads;
  const bool cluster = !kWideCta && params.cluster_combine;
  __shared__ __align__(16) float cluster_o[G * D];
  __shared__ float cluster_lse[G];
  // kDims dims of one head a thread: the head's weights over the warps are
  // taken once for its kDims outputs, and the 4-warp CTA's loads and stores
  // are 16 bytes. With a dim a thread, its 128 threads ran four of these
  // chains one after another (G * D = 512 dims at G = 4, d128) on the path
  // from the last tile to the merge: b1 L4096 9.95 -> 9.34 us a launch,
  // L32768 48.8 -> 48.1 (device run 264, H100). The wide CTA keeps a dim a
  // thread: its 512 threads cover the dims at once, and four a thread made
  // its h16/8 row 0.16 us slower. The same operations in the same order per
  // dim either way, so the same bits.
  constexpr int kDims = kWideCta ? 1 : 4;
  constexpr int kSlices = D / kDims; // of a head
  for (int idx = threadIdx.x; idx < G * kSlices; idx += kThreads) {
    const int g = idx / kSlices, dim0 = (idx % kSlices) * kDims;
    const int head = kv_head * G + g;
    float max_m = -INFINITY;
    // Unrolled by 4, not 16 (the wide CTA): as fast (device run 133) in
    // 1.7 KB less code, and the same sums in the same order. The wide
    // CTA's merge takes ~1.4K cycles warm as cold (run 222), and as long
    // with a sixth of these shared loads (run 223): neither its code nor
    // its loads set that time.
#pragma unroll 4
    for (int w = 0; w < W; ++w)
      max_m = fmaxf(max_m, warp_m[w * G + g]);
    float sum = 0.f;
    float out[kDims] = {};
    if (max_m != -INFINITY) {
#pragma unroll 4
      for (int w = 0; w < W; ++w) {
        const float wgt = exp2f(warp_m[w * G + g] - max_m);
        sum += warp_l[w * G + g] * wgt;
        const float *acc = warp_acc + (w * G + g) * D + dim0;
        if constexpr (kDims == 4) {
          const float4 acc4 = *reinterpret_cast<const float4 *>(acc);
          out[0] += acc4.x * wgt;
          out[1] += acc4.y * wgt;
          out[2] += acc4.z * wgt;
          out[3] += acc4.w * wgt;
        } else {
          out[0] += acc[0] * wgt;
        }
      }
#pragma unroll
      for (int i = 0; i < kDims; ++i)
        out[i] /= sum;
    }
    const float lse2 = max_m == -INFINITY ? -INFINITY : max_m + log2f(sum);
    const long long row = (long long)seq * params.num_qo_heads + head;
    auto storeFloats = [&](float *dst) {
      if constexpr (kDims == 4)
        *reinterpret_cast<float4 *>(dst) = make_float4(out[0], out[1], out[2], out[3]);
      else
        dst[0] = out[0];
    };
    if (cluster) {
      storeFloats(cluster_o + g * D + dim0);
      if (dim0 == 0)
        cluster_lse[g] = lse2;
    } else if (params.num_splits == 1) {
      T *o = static_cast<T *>(params.o) + seq * params.o_batch_stride +
             head * params.o_head_stride + dim0;
      if constexpr (kDims == 4)
        *reinterpret_cast<uint2 *>(o) =
            make_uint2(Ops::fromFloat2(out[0], out[1]), Ops::fromFloat2(out[2], out[3]));
      else
        o[0] = Ops::fromFloat(out[0]);
      if (params.maybe_lse != nullptr && dim0 == 0)
        params.maybe_lse[row] = lse2 * kLn2;
    } else {
      storeFloats(params.maybe_partial_o + (split * rows + row) * D + dim0);
      if (dim0 == 0)
        params.maybe_partial_lse[split * rows + row] = lse2;
    }
  }

  if (cluster) {
    // The splits of (seq, kv head) are one cluster along x, rank = split.
    traceLatest(params.maybe_trace, kTraceLatestMarkC);
    clusterSync(); // every CTA's partial is in its shared memory
    if (clusterCtaRank() == 0) {
      traceLatest(params.maybe_trace, kTraceLatestMarkD);
      __shared__ float cluster_weights[kMaxClusterSplits * G];
      combineSplits<T, G, D, kThreads>(
          params, seq, kv_head, params.num_splits,
          [&](int sp, int g) { return loadCluster(clusterSharedAddress(cluster_lse + g, sp)); },
          [&](int sp, int g, int quad4) {
            return loadCluster4(clusterSharedAddress(cluster_o + g * D + quad4 * 4, sp));
          },
          cluster_weights);
    }
    clusterSync(); // the others' shared memory lives until the first CTA has read it
    return;
  }
  if (params.num_splits == 1 || params.maybe_split_counters == nullptr)
    return;
  mergeSplitsAsLastCta<T, G, D, kThreads>(params, seq, kv_head, combine_stage, combine_stage_bytes);
}

template <class Traits, class Variant>
__global__ void __launch_bounds__(Traits::kThreads) pagedDecodeKernel(const DecodeParams params) {
  using T = typename Traits::DType;
  using Ops = ElementOps<T>;
  constexpr int G = Traits::kGroupSize, VEC = Traits::kVec, L = Traits::kLanesPerToken;
  constexpr int SLOTS = Traits::kTokenSlots, U = Traits::kUnroll, D = Traits::kHeadDim;
  constexpr int W = Traits::kWarps;

  const int split = blockIdx.x, kv_head = blockIdx.y, seq = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int slot = lane / L, dim0 = (lane % L) * VEC;
  pdlLaunchDependents();
  // The query and the newest key's K/V come from the previous kernel; the
  // older keys, the page table and kv_lens do not (kv_before_wait).
  const bool early = params.kv_before_wait;
  if (!early)
    pdlWait();

  const int kv_len = params.kv_lens[seq];
  const int query_pos = kv_len - 1;
  const int key_begin = kv_len > 0 ? Variant::keyBegin(query_pos, params.variant) : 0;
  const int chunk = ceilDiv(kv_len - key_begin, params.num_splits);
  const int chunk_begin = key_begin + split * chunk;
  const int chunk_end = min(kv_len, chunk_begin + chunk);

  const T *k_base = static_cast<const T *>(params.kv.k) + kv_head * params.kv.head_stride + dim0;
  const T *v_base = static_cast<const T *>(params.kv.v) + kv_head * params.kv.head_stride + dim0;
  const int warp_token0 = warp * Traits::kTokensPerWarpIter + slot;

  // Keys in [tile_begin, chunk_end) but `skip` (zeros in its slot).
  auto loadTile = [&](int tile_begin, uint4 (&k_regs)[U], uint4 (&v_regs)[U], int skip = -1) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int token = tile_begin + warp_token0 + u * SLOTS;
      if (token < chunk_end && token != skip) {
        long long row = kvRowOffset<Traits::kPageSize>(params.kv, seq, token);
        k_regs[u] = loadGlobal16(k_base + row);
        v_regs[u] = loadGlobal16(v_base + row);
      } else {
        k_regs[u] = make_uint4(0, 0, 0, 0);
        v_regs[u] = make_uint4(0, 0, 0, 0);
      }
    }
  };

  uint4 k_cur[U], v_cur[U];
  // Before the wait the newest key is not touched at all (not even its
  // cache lines): the previous kernel may still be writing it.
  loadTile(chunk_begin, k_cur, v_cur, early ? query_pos : -1);
  if (early) {
    pdlWait();
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (chunk_begin + warp_token0 + u * SLOTS == query_pos && query_pos < chunk_end) {
        long long row = kvRowOffset<Traits::kPageSize>(params.kv, seq, query_pos);
        k_cur[u] = loadGlobal16(k_base + row);
        v_cur[u] = loadGlobal16(v_base + row);
      }
  }

  float q[G][VEC];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const T *qp = static_cast<const T *>(params.q) + seq * params.q_batch_stride +
                  (kv_head * G + g) * params.q_head_stride + dim0;
    uint4 raw = *reinterpret_cast<const uint4 *>(qp);
    unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 f = Ops::toFloat2(words[i]);
      q[g][2 * i] = f.x;
      q[g][2 * i + 1] = f.y;
    }
  }

  float m[G], l[G], acc[G][VEC];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      acc[g][i] = 0.f;
  }

  for (int tile = chunk_begin; tile < chunk_end; tile += Traits::kTokensPerCtaIter) {
    uint4 k_next[U], v_next[U];
    loadTile(tile + Traits::kTokensPerCtaIter, k_next, v_next);

    float s[U][G];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      unsigned words[4] = {k_cur[u].x, k_cur[u].y, k_cur[u].z, k_cur[u].w};
      float kf[VEC];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float2 f = Ops::toFloat2(words[i]);
        kf[2 * i] = f.x;
        kf[2 * i + 1] = f.y;
      }
      const bool valid = tile + warp_token0 + u * SLOTS < chunk_end;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < VEC; ++i)
          dot = fmaf(q[g][i], kf[i], dot);
#pragma unroll
        for (int offset = L / 2; offset > 0; offset /= 2)
          dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        s[u][g] = valid ? Variant::logit(dot, params.variant) : -INFINITY;
      }
    }

#pragma unroll
    for (int g = 0; g < G; ++g) {
      float m_new = m[g];
#pragma unroll
      for (int u = 0; u < U; ++u)
        m_new = fmaxf(m_new, s[u][g]);
      // A slot that has seen only masked keys keeps m = -inf; its p are 0.
      float scale = m_new == -INFINITY ? 1.f : exp2f(m[g] - m_new);
      l[g] *= scale;
#pragma unroll
      for (int i = 0; i < VEC; ++i)
        acc[g][i] *= scale;
      m[g] = m_new;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        s[u][g] = m_new == -INFINITY ? 0.f : exp2f(s[u][g] - m_new);
        l[g] += s[u][g];
      }
    }

#pragma unroll
    for (int u = 0; u < U; ++u) {
      unsigned words[4] = {v_cur[u].x, v_cur[u].y, v_cur[u].z, v_cur[u].w};
      float vf[VEC];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float2 f = Ops::toFloat2(words[i]);
        vf[2 * i] = f.x;
        vf[2 * i + 1] = f.y;
      }
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int i = 0; i < VEC; ++i)
          acc[g][i] = fmaf(s[u][g], vf[i], acc[g][i]);
    }

#pragma unroll
    for (int u = 0; u < U; ++u) {
      k_cur[u] = k_next[u];
      v_cur[u] = v_next[u];
    }
  }

  // Merge the token slots of this warp (lanes L, 2L, ... apart).
#pragma unroll
  for (int offset = L; offset < 32; offset *= 2) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float m2 = __shfl_xor_sync(0xffffffffu, m[g], offset);
      float l2 = __shfl_xor_sync(0xffffffffu, l[g], offset);
      float acc2[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i)
        acc2[i] = __shfl_xor_sync(0xffffffffu, acc[g][i], offset);
      mergeSoftmaxState(m[g], l[g], acc[g], m2, l2, acc2);
    }
  }

  // Merge the warps through shared memory.
  // 16-byte aligned: the merging CTA may stage partials here by cp.async.
  __shared__ __align__(16) float merge_buffer[Traits::kSmemFloats];
  float *warp_acc = merge_buffer;               // [W][G][D]
  float *warp_m = merge_buffer + W * G * D;     // [W][G]
  float *warp_l = warp_m + W * G;               // [W][G]
  if (slot == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int i = 0; i < VEC; ++i)
        warp_acc[(warp * G + g) * D + dim0 + i] = acc[g][i];
      if (dim0 == 0) {
        warp_m[warp * G + g] = m[g];
        warp_l[warp * G + g] = l[g];
      }
    }
  }
  __syncthreads();

  // The merging CTA's split weights (or, where they fit, its staged
  // partials) go in merge_buffer once the per-warp states are merged.
  static_assert(Traits::kSmemFloats >= kMaxMergedSplits * G,
                "merge_buffer holds the split weights");
  decodeEpilogue<T, G, D, W, Traits::kThreads>(params, warp_acc, warp_m, warp_l, split, seq,
                                               kv_head, merge_buffer, (int)sizeof(merge_buffer));
}

/// The split merge as a launch of its own (DecodeParams without split
/// counters): grid (qo_heads, batch), a thread per four output elements
/// (at least a warp: the weights' shuffles need one), combineSplits from
/// global memory. Launched with PDL after a decode launch that is, so its
/// CTAs wait beside the decode's and start as it ends. Still slower than the
/// fused combine in the step's setting (device run 238: b1 L4096 11.0
/// against 10.5 us a launch): one more dependent launch costs more than the
/// fused combine's count and last-CTA loads.
template <int kHeadDim> constexpr int kCombineSplitsThreads = kHeadDim / 4 < 32 ? 32 : kHeadDim / 4;
template <typename DType, int kHeadDim>
__global__ void __launch_bounds__(kCombineSplitsThreads<kHeadDim>)
    combineSplitsKernel(const __grid_constant__ DecodeParams params) {
  pdlLaunchDependents();
  pdlWait(); // the partials come from the decode launch before
  const int head = blockIdx.x, seq = blockIdx.y;
  const long long rows = (long long)params.batch * params.num_qo_heads;
  const long long row = (long long)seq * params.num_qo_heads + head;
  const float4 *partial_o = reinterpret_cast<const float4 *>(params.maybe_partial_o);
  // One head a CTA: a group of one, `head` as its kv head.
  __shared__ float weights[kMaxMergedSplits];
  combineSplits<DType, 1, kHeadDim, kCombineSplitsThreads<kHeadDim>>(
      params, seq, head, params.num_splits,
      [&](int sp, int) { return __ldcg(params.maybe_partial_lse + sp * rows + row); },
      [&](int sp, int, int quad4) {
        return __ldcg(partial_o + (sp * rows + row) * (kHeadDim / 4) + quad4);
      },
      weights);
}

} // namespace txc::kernels
