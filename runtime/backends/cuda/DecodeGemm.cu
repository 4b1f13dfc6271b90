//===- DecodeGemm.cu - Decode-batch GEMMs on wgmma ------------------------===//
//
// One warpgroup a CTA, one CTA a resident slot (stream-K, below). A tile is
// 64 weight rows (for
// SwiGLU 32 gate rows and the matching 32 up rows, so the epilogue has both
// halves of its outputs); the batch (up to 32 or 64 rows, zero-filled past
// m) is the wgmma N operand. Both operands are K-major in 128-byte-swizzled
// shared memory (attention/wgmma.cuh), one 64-wide column block per stage.
//
// Pipeline, per chunk c of a tile segment: wait for chunk c's copies, fence
// them for the async proxy, barrier; request chunk c + 4 into the stage
// chunk c - 2 used (every warp waited for that wgmma group at the end of
// chunk c - 1); issue the four k16 wgmmas of chunk c; wait for chunk c - 1's
// group. Every iteration commits one cp.async group, empty or not, so
// "chunk c landed" is always "at most 3 groups pending".
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/DecodeGemm.h"
#include "runtime/backends/cuda/ElementAccess.cuh"
#include "runtime/backends/cuda/Launch.cuh"
#include "runtime/backends/cuda/StreamK.h"

#include "attention/sm90_pipeline.cuh"
#include "attention/wgmma.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

namespace txc::cuda {

namespace {

constexpr int kThreads = 128;       // one warpgroup
constexpr int kTileRows = 64;       // weight rows a tile: the wgmma M
constexpr int kChunkK = 64;         // K a stage: one 128-byte column block
constexpr int kStages = 6;          //
constexpr int kAhead = kStages - 2; // chunks requested ahead of the one in use

template <int kTok> struct Shape {
  static constexpr int kRows = 32 * kTok; // batch rows: the wgmma N
  static constexpr int kWElems = kTileRows * kChunkK;
  static constexpr int kXElems = kRows * kChunkK;
  static constexpr int kStageElems = kWElems + kXElems; // 1024-byte multiples
  // The stages, and 1 KB to align their start (the swizzle needs 1024).
  static constexpr int kSmemBytes = kStages * kStageElems * 2 + 1024;
  static constexpr int kLd = kRows + 1; // the epilogue's fp32 tile, padded
  static_assert(kTileRows * kLd * 4 + 4 <= kStages * kStageElems * 2,
                "the epilogue tile and the last-CTA flag reuse the stages");
};

template <typename T, int kTok>
__device__ __forceinline__ void wgmmaStep(float (&acc)[4 * kTok][4], unsigned long long a,
                                          unsigned long long b) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (kTok == 1) {
    if constexpr (kBf16)
      kernels::wgmmaSS_m64n32k16_bf16(acc, a, b, 1);
    else
      kernels::wgmmaSS_m64n32k16_f16(acc, a, b, 1);
  } else {
    if constexpr (kBf16)
      kernels::wgmmaSS_m64n64k16_bf16(acc, a, b, 1);
    else
      kernels::wgmmaSS_m64n64k16_f16(acc, a, b, 1);
  }
}

/// Stores the finished fp32 tile (tile row i, batch row `token` at
/// tile_acc[i * kLd + token]) through the GEMV's epilogues, features
/// fastest (coalesced). Every global load (bias, residual) is issued before
/// the first store: `out` may be the residual, so loads after a store could
/// not be hoisted, and a chain of 16 dependent L2 round trips cost ~10 us a
/// launch (device run 29).
template <int kTok, bool kSwiglu>
__device__ __forceinline__ void storeTile(const GemvArgs &a, int64_t tile, const float *tile_acc) {
  using S = Shape<kTok>;
  constexpr int kFeatures = kSwiglu ? 32 : kTileRows; // outputs a tile
  constexpr int kPer = kFeatures * S::kRows / kThreads;
  float v[kPer], w[kPer]; // the gate and the up row for SwiGLU, else value and residual
#pragma unroll
  for (int p = 0; p < kPer; ++p) {
    const int idx = threadIdx.x + p * kThreads, i = idx % kFeatures;
    const int64_t token = idx / kFeatures;
    v[p] = tile_acc[i * S::kLd + token];
    w[p] = 0.0f;
    if (token >= a.m)
      continue;
    if constexpr (kSwiglu) {
      const int64_t g_row = tile * 32 + i, u_row = a.n / 2 + g_row;
      w[p] = tile_acc[(32 + i) * S::kLd + token];
      if (a.bias) {
        v[p] += ld(a.bias, a.bias_type, g_row);
        w[p] += ld(a.bias, a.bias_type, u_row);
      }
    } else {
      const int64_t row = tile * kTileRows + i;
      if (row >= a.n)
        continue;
      if (a.bias)
        v[p] += ld(a.bias, a.bias_type, row);
      if (a.epilogue == GemvEpilogue::kResidualAdd)
        w[p] = ld(a.residual, a.out_type, token * a.n + row);
    }
  }
#pragma unroll
  for (int p = 0; p < kPer; ++p) {
    const int idx = threadIdx.x + p * kThreads, i = idx % kFeatures;
    const int64_t token = idx / kFeatures;
    if (token >= a.m)
      continue;
    if constexpr (kSwiglu) {
      const int64_t g_row = tile * 32 + i;
      st(a.out, a.out_type, token * (a.n / 2) + g_row, v[p] / (1.0f + expf(-v[p])) * w[p]);
    } else {
      const int64_t row = tile * kTileRows + i;
      if (row < a.n)
        st(a.out, a.out_type, token * a.n + row, v[p] + w[p]);
    }
  }
}

/// Stream-K: the (tile, K chunk) steps of the whole GEMM, tile-major, are
/// cut into gridDim.x equal contiguous ranges, one a CTA, so every CTA
/// streams the same number of weight bytes whatever the tile count (a
/// tile-per-CTA grid of 448 Llama-3-8B gate/up tiles over 396 resident
/// slots would run a second wave one eighth full). A CTA runs each tile
/// segment of its range through the ring; a whole tile is stored at once,
/// a part goes to partial slot (CTA + tile) and the tile's last part to
/// arrive sums the parts in CTA order (deterministic) and stores it.
template <typename T, int kTok>
__global__ void __launch_bounds__(kThreads)
    decodeGemmKernel(const GemvArgs a, float *partials, unsigned *counters) {
  using S = Shape<kTok>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char *smem_base = smem_raw + ((1024 - kernels::smemAddress(smem_raw) % 1024) % 1024);
  T *smem = reinterpret_cast<T *>(smem_base);
  float *tile_acc = reinterpret_cast<float *>(smem_base); // [kTileRows][kLd] after a segment
  unsigned *is_last = reinterpret_cast<unsigned *>(tile_acc + kTileRows * S::kLd);
  pdlLaunchDependents();
  const int tid = threadIdx.x;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t chunks = a.k / kChunkK; // a tile's
  const int64_t tiles = swiglu ? a.n / 64 : (a.n + kTileRows - 1) / kTileRows;
  const StreamK schedule{tiles * chunks, gridDim.x};
  const int64_t cta = blockIdx.x;
  const int64_t range_begin = schedule.rangeBegin(cta), range_end = schedule.rangeBegin(cta + 1);
  const unsigned long long desc_base = kernels::wgmmaDescriptorK128(kernels::smemAddress(smem));
  constexpr unsigned kStageStep = S::kStageElems * 2 / 16; // descriptor units (16 bytes)
  constexpr unsigned kXStep = S::kWElems * 2 / 16;
  constexpr int kWCopies = kTileRows * 8 / kThreads;
  constexpr int kXCopies = S::kRows * 8 / kThreads;
  bool waited = false;

  for (int64_t u = range_begin; u < range_end;) {
    const int64_t tile = u / chunks, c_begin = u % chunks;
    const int64_t c_end =
        c_begin + (range_end - u < chunks - c_begin ? range_end - u : chunks - c_begin);
    const int64_t steps = c_end - c_begin;
    u += steps;

    // This thread's copies of a chunk: W row idx / 8 and x row idx / 8, each
    // 16-byte chunk idx % 8, for idx = tid + i * kThreads.
    const T *w_src[kWCopies], *x_src[kXCopies];
    int w_dst[kWCopies], x_dst[kXCopies];
    bool w_valid[kWCopies], x_valid[kXCopies];
#pragma unroll
    for (int i = 0; i < kWCopies; ++i) {
      const int idx = tid + i * kThreads, r = idx / 8, c = idx % 8;
      int64_t row;
      if (swiglu)
        row = (r < 32 ? 0 : a.n / 2) + tile * 32 + (r & 31);
      else
        row = tile * kTileRows + r < a.n ? tile * kTileRows + r : -1;
      w_valid[i] = row >= 0;
      w_src[i] =
          static_cast<const T *>(a.w) + (row >= 0 ? row : 0) * a.k + c_begin * kChunkK + c * 8;
      w_dst[i] = kernels::wgmmaTileOffset(kTileRows, r, c);
    }
#pragma unroll
    for (int i = 0; i < kXCopies; ++i) {
      const int idx = tid + i * kThreads, r = idx / 8, c = idx % 8;
      x_valid[i] = r < a.m;
      x_src[i] = static_cast<const T *>(a.x) + (r < a.m ? r : 0) * a.k + c_begin * kChunkK + c * 8;
      x_dst[i] = S::kWElems + kernels::wgmmaTileOffset(S::kRows, r, c);
    }
    // Step s of the segment (chunk c_begin + s) goes to stage s % kStages.
    auto loadW = [&](int64_t step) {
      T *stage = smem + (step % kStages) * S::kStageElems;
#pragma unroll
      for (int i = 0; i < kWCopies; ++i)
        kernels::cpAsync16(stage + w_dst[i], w_src[i] + step * kChunkK, w_valid[i]);
    };
    auto loadX = [&](int64_t step) {
      T *stage = smem + (step % kStages) * S::kStageElems;
#pragma unroll
      for (int i = 0; i < kXCopies; ++i)
        kernels::cpAsync16(stage + x_dst[i], x_src[i] + step * kChunkK, x_valid[i]);
    };

    // The weights are constant: the first segment's first chunks go out
    // before the wait for the previous kernel (which wrote x).
    for (int s = 0; s < kAhead; ++s)
      if (s < steps)
        loadW(s);
    if (!waited) {
      pdlWait();
      waited = true;
    }
    for (int s = 0; s < kAhead; ++s) {
      if (s < steps)
        loadX(s);
      kernels::cpAsyncCommit();
    }

    float acc[4 * kTok][4];
#pragma unroll
    for (int j = 0; j < 4 * kTok; ++j)
      acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    for (int64_t s = 0; s < steps; ++s) {
      kernels::cpAsyncWait<kAhead - 1>(); // step s, this thread's copies
      kernels::fenceProxyAsyncShared();
      __syncthreads(); // everyone's copies; every warp is past step s - 2's wgmma
      if (s + kAhead < steps) {
        loadW(s + kAhead);
        loadX(s + kAhead);
      }
      kernels::cpAsyncCommit();
      const unsigned long long da = desc_base + (s % kStages) * kStageStep, db = da + kXStep;
      kernels::pinRegisters(acc);
      kernels::wgmmaFence();
#pragma unroll
      for (int kk = 0; kk < kChunkK / 16; ++kk) // 32 bytes a k16 step
        wgmmaStep<T, kTok>(acc, da + kk * 2, db + kk * 2);
      kernels::wgmmaCommit();
      kernels::wgmmaWait<1>();
      kernels::pinRegisters(acc);
    }
    kernels::wgmmaWait<0>();
    kernels::pinRegisters(acc);

    // A part of a shared tile goes to its slot as the fragments are held,
    // one float4 a column tile j, coalesced: acc[j] of thread t at
    // (j * kThreads + t) * 4. The tile's last part sums all parts in CTA
    // order (its own from registers, the same value), every part's loads in
    // flight at once, instead of a chain of round trips (device run 29).
    constexpr int kJ = 4 * kTok;
    constexpr int kElems = kTileRows * S::kRows;
    bool store = steps == chunks;
    if (!store) {
      const int64_t first = schedule.firstCta(tile, chunks);
      const int64_t parts = schedule.parts(tile, chunks);
      float4 *mine = reinterpret_cast<float4 *>(partials + StreamK::slot(cta, tile) * kElems);
#pragma unroll
      for (int j = 0; j < kJ; ++j)
        __stcg(mine + j * kThreads + tid, make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]));
      __threadfence();
      __syncthreads();
      if (tid == 0)
        *is_last = atomicAdd(&counters[tile], 1u) == static_cast<unsigned>(parts) - 1;
      __syncthreads();
      store = *is_last != 0;
      if (store) {
        __threadfence();
        float4 sum[kJ];
#pragma unroll
        for (int j = 0; j < kJ; ++j)
          sum[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int64_t part = 0; part < parts; ++part) { // in CTA order
          float4 add[kJ];
          if (first + part == cta) {
#pragma unroll
            for (int j = 0; j < kJ; ++j)
              add[j] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
          } else {
            const float4 *theirs = reinterpret_cast<const float4 *>(
                partials + StreamK::slot(first + part, tile) * kElems);
#pragma unroll
            for (int j = 0; j < kJ; ++j)
              add[j] = __ldcg(theirs + j * kThreads + tid);
          }
#pragma unroll
          for (int j = 0; j < kJ; ++j) {
            sum[j].x += add[j].x;
            sum[j].y += add[j].y;
            sum[j].z += add[j].z;
            sum[j].w += add[j].w;
          }
        }
#pragma unroll
        for (int j = 0; j < kJ; ++j) {
          acc[j][0] = sum[j].x;
          acc[j][1] = sum[j].y;
          acc[j][2] = sum[j].z;
          acc[j][3] = sum[j].w;
        }
        if (tid == 0)
          counters[tile] = 0; // ready for the next launch (and graph replays)
      }
    }
    if (store) {
      kernels::cpAsyncWait<0>();
      __syncthreads(); // the stages are free: the accumulators go there
      // Warp w holds tile rows 16w..16w+15 of each n8 column tile j, in the
      // mma.sync m16n8 order.
      const int warp = tid / 32, lane = tid % 32, group = lane / 4, quad = lane % 4;
#pragma unroll
      for (int j = 0; j < kJ; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          tile_acc[(warp * 16 + group + (e >= 2 ? 8 : 0)) * S::kLd + j * 8 + quad * 2 + (e & 1)] =
              acc[j][e];
      __syncthreads();
      if (swiglu)
        storeTile<kTok, true>(a, tile, tile_acc);
      else
        storeTile<kTok, false>(a, tile, tile_acc);
    }
    __syncthreads(); // the next segment's copies reuse the stages
  }
}

/// The most partial slots a launch may need: one per (CTA, tile) pair that
/// meet, at most CTAs + tiles.
template <int kTok> int64_t partialFloats(int64_t ctas, int64_t tiles) {
  return (ctas + tiles) * kTileRows * Shape<kTok>::kRows;
}

/// Resident CTAs per SM of one kernel (its shared memory raised first);
/// asked once, before any launch is captured into a graph.
template <typename T, int kTok> int residentPerSm() {
  static const int per_sm = [] {
    using S = Shape<kTok>;
    auto kernel = decodeGemmKernel<T, kTok>;
    int blocks = 0;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, S::kSmemBytes) !=
            cudaSuccess)
      return 0;
    return blocks;
  }();
  return per_sm;
}

template <typename T, int kTok>
cudaError_t launchTyped(const GemvArgs &a, const DecodeGemmWorkspace &ws, cudaStream_t stream) {
  using S = Shape<kTok>;
  const int per_sm = residentPerSm<T, kTok>();
  if (per_sm == 0)
    return cudaErrorInvalidConfiguration;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t tiles = swiglu ? a.n / 64 : (a.n + kTileRows - 1) / kTileRows;
  const int64_t total = tiles * (a.k / kChunkK);
  // One CTA per resident slot, each at least kMinSteps chunks; a tile per
  // CTA where the tiles fill whole waves, or the workspace is too small.
  constexpr int64_t kMinSteps = 4;
  const int64_t slots = int64_t{smCount()} * per_sm;
  int64_t ctas = std::max<int64_t>(1, std::min(slots, total / kMinSteps));
  if (tiles % slots == 0 || partialFloats<kTok>(ctas, tiles) > ws.partial_floats ||
      tiles > ws.num_counters)
    ctas = tiles;
  return launchKernel(decodeGemmKernel<T, kTok>, dim3(static_cast<unsigned>(ctas)), dim3(kThreads),
                      S::kSmemBytes, stream, a.pdl, a, ws.partials, ws.counters);
}

} // namespace

bool decodeGemmSupports(const GemvArgs &a) {
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  return (a.type == EType::kBF16 || a.type == EType::kF16) &&
         (a.out_type == a.type || a.out_type == EType::kF32) && a.m >= 1 &&
         a.m <= kDecodeGemmMaxRows && a.n >= 1 && a.k >= kChunkK && a.k % kChunkK == 0 &&
         aligned16(a.x) && aligned16(a.w) && (!swiglu || a.n % 64 == 0) &&
         (a.epilogue != GemvEpilogue::kResidualAdd || a.residual) && !a.norm_weight &&
         !a.rope_counters;
}

cudaError_t prepareDecodeGemm() {
  if (residentPerSm<__nv_bfloat16, 1>() == 0 || residentPerSm<__nv_bfloat16, 2>() == 0 ||
      residentPerSm<__half, 1>() == 0 || residentPerSm<__half, 2>() == 0)
    return cudaErrorInvalidConfiguration;
  return cudaSuccess;
}

cudaError_t launchDecodeGemm(const GemvArgs &a, const DecodeGemmWorkspace &workspace,
                             cudaStream_t stream) {
  if (!decodeGemmSupports(a))
    return cudaErrorInvalidValue;
  if (a.type == EType::kBF16)
    return a.m <= 32 ? launchTyped<__nv_bfloat16, 1>(a, workspace, stream)
                     : launchTyped<__nv_bfloat16, 2>(a, workspace, stream);
  return a.m <= 32 ? launchTyped<__half, 1>(a, workspace, stream)
                   : launchTyped<__half, 2>(a, workspace, stream);
}

} // namespace txc::cuda
