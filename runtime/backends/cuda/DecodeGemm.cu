//===- DecodeGemm.cu - Decode-batch GEMMs on wgmma ------------------------===//
//
// One warpgroup a CTA, one CTA a resident slot (stream-K, below). A tile is
// 64 weight rows (for SwiGLU 32 gate rows and the matching 32 up rows,
// interleaved by eights so each thread holds both halves of its outputs);
// the batch (up to 32 or 64 rows, zero-filled past m) is the wgmma N
// operand. Both operands are K-major in 128-byte-swizzled shared memory
// (attention/wgmma.cuh), one 64-wide column block per stage.
//
// Pipeline, per step i of a CTA's range (whatever tile it belongs to): wait
// for step i's copies, fence them for the async proxy, barrier; request step
// i + 4 into the stage step i - 2 used (every warp waited for that wgmma
// group at the end of step i - 1); issue the four k16 wgmmas of step i; wait
// for step i - 1's group. Every iteration commits one cp.async group, empty
// or not, so "step i landed" is always "at most 3 groups pending". Where a
// tile's segment ends, its accumulators are stored (or handed on as a
// partial) from registers while the next segment's copies are in flight.
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
constexpr int kStages = 6;          // the cp.async ring
constexpr int kAhead = kStages - 2; // chunks requested ahead of the one in use

template <int kTok> struct Shape {
  static constexpr int kRows = 32 * kTok; // batch rows: the wgmma N
  static constexpr int kWElems = kTileRows * kChunkK;
  static constexpr int kXElems = kRows * kChunkK;
  static constexpr int kStageElems = kWElems + kXElems; // 1024-byte multiples
  static constexpr int kStagesBytes = kStages * kStageElems * 2;
  // The stages, 1 KB to align their start (the swizzle needs 1024), and the
  // last-part flag after them.
  static constexpr int kSmemBytes = kStagesBytes + 1024 + 16;
};

/// acc (+)= one k16 step; accumulate = 0 starts a tile's sum, so the
/// accumulators are never written outside wgmma (ptxas serializes every
/// wgmma of a kernel that writes them on a divergent path: C7517/C7518).
template <typename T, int kTok>
__device__ __forceinline__ void wgmmaStep(float (&acc)[4 * kTok][4], unsigned long long a,
                                          unsigned long long b, int accumulate) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (kTok == 1) {
    if constexpr (kBf16)
      kernels::wgmmaSS_m64n32k16_bf16(acc, a, b, accumulate);
    else
      kernels::wgmmaSS_m64n32k16_f16(acc, a, b, accumulate);
  } else {
    if constexpr (kBf16)
      kernels::wgmmaSS_m64n64k16_bf16(acc, a, b, accumulate);
    else
      kernels::wgmmaSS_m64n64k16_f16(acc, a, b, accumulate);
  }
}

/// Where this thread's accumulators acc[j][e] sit (wgmma's m64nN D fragment,
/// mma.sync's m16n8 per warp): tile row 16 warp + group + 8 (e >> 1),
/// column (batch row) 8j + 2 quad + (e & 1).
struct Fragment {
  int warp, group, quad;
  __device__ Fragment()
      : warp(threadIdx.x / 32), group(threadIdx.x % 32 / 4), quad(threadIdx.x % 4) {}
  __device__ int row(int e) const { return warp * 16 + group + (e >> 1) * 8; }
  __device__ int token(int j, int e) const { return j * 8 + quad * 2 + (e & 1); }
};

/// A SwiGLU tile interleaves its 32 gate and 32 up rows by eights (tile rows
/// 16w..16w+7 gate, 16w+8..16w+15 up, of features 8w..8w+7), so a thread's
/// e = 0, 1 accumulators are the gate of the feature whose up are e = 2, 3,
/// and the epilogue needs no exchange. The weight row of tile row r:
__device__ __forceinline__ int64_t weightRow(const GemvArgs &a, bool swiglu, int64_t tile, int r) {
  if (swiglu)
    return ((r >> 3) & 1 ? a.n / 2 : 0) + tile * 32 + (r >> 4) * 8 + (r & 7);
  const int64_t row = tile * kTileRows + r;
  return row < a.n ? row : -1;
}

/// Stores a finished tile from the accumulators through the GEMV's
/// epilogues. Every global load (bias, residual) is issued before the first
/// store: `out` may be the residual, so a load after a store could not be
/// hoisted, and a chain of 16 dependent L2 round trips cost ~10 us a launch
/// (device run 29).
template <int kTok>
__device__ __forceinline__ void storeTile(const GemvArgs &a, bool swiglu, int64_t tile,
                                          const float (&acc)[4 * kTok][4]) {
  constexpr int kJ = 4 * kTok;
  const Fragment f;
  if (swiglu) {
    const int64_t feature = tile * 32 + f.warp * 8 + f.group, half = a.n / 2;
    float bias_g = 0.0f, bias_u = 0.0f;
    if (a.bias) {
      bias_g = ld(a.bias, a.bias_type, feature);
      bias_u = ld(a.bias, a.bias_type, half + feature);
    }
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int token = f.token(j, e);
        if (token < a.m) {
          const float g = acc[j][e] + bias_g, u = acc[j][e + 2] + bias_u;
          st(a.out, a.out_type, token * half + feature, g / (1.0f + expf(-g)) * u);
        }
      }
    return;
  }
  float add[kJ][4]; // bias + residual
#pragma unroll
  for (int e = 0; e < 4; e += 2) {
    const int64_t row = tile * kTileRows + f.row(e);
    const float bias = a.bias && row < a.n ? ld(a.bias, a.bias_type, row) : 0.0f;
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int token = f.token(j, e + h);
        add[j][e + h] = bias;
        if (a.epilogue == GemvEpilogue::kResidualAdd && token < a.m && row < a.n)
          add[j][e + h] += ld(a.residual, a.out_type, token * a.n + row);
      }
  }
#pragma unroll
  for (int j = 0; j < kJ; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t row = tile * kTileRows + f.row(e);
      const int token = f.token(j, e);
      if (token < a.m && row < a.n)
        st(a.out, a.out_type, token * a.n + row, acc[j][e] + add[j][e]);
    }
}

/// Stream-K: the (tile, K chunk) steps of the whole GEMM, tile-major, are
/// cut into gridDim.x equal contiguous ranges, one a CTA, so every CTA
/// streams the same number of weight bytes whatever the tile count (a
/// tile-per-CTA grid of 448 Llama-3-8B gate/up tiles over 396 resident
/// slots would run a second wave one eighth full). A CTA's range runs
/// through one ring whatever tiles it crosses, so the next tile's chunks
/// stream in while a finished segment is stored. A whole tile is stored
/// from the accumulators; a part goes to partial slot (CTA + tile) as the
/// fragments are held (one float4 a column tile j, coalesced), and the
/// tile's last part to arrive sums every part in CTA order (deterministic),
/// kPartsInFlight parts' loads at a time.
template <typename T, int kTok>
__global__ void __launch_bounds__(kThreads)
    decodeGemmKernel(const GemvArgs a, float *partials, unsigned *counters) {
  using S = Shape<kTok>;
  constexpr int kJ = 4 * kTok;
  constexpr int kElems = kTileRows * S::kRows; // a partial slot's floats
  constexpr int kPartsInFlight = kTok == 1 ? 4 : 2;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char *smem_base = smem_raw + ((1024 - kernels::smemAddress(smem_raw) % 1024) % 1024);
  T *smem = reinterpret_cast<T *>(smem_base);
  unsigned &is_last = *reinterpret_cast<unsigned *>(smem_base + S::kStagesBytes);
  pdlLaunchDependents();
  const int tid = threadIdx.x;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int chunks = static_cast<int>(a.k / kChunkK); // a tile's
  const int64_t tiles = swiglu ? a.n / 64 : (a.n + kTileRows - 1) / kTileRows;
  const StreamK schedule{tiles * chunks, gridDim.x};
  const int64_t cta = blockIdx.x;
  const int64_t range_begin = schedule.rangeBegin(cta);
  const int steps = static_cast<int>(schedule.rangeBegin(cta + 1) - range_begin);
  const unsigned long long desc_base = kernels::wgmmaDescriptorK128(kernels::smemAddress(smem));
  constexpr unsigned kStageStep = S::kStageElems * 2 / 16; // descriptor units (16 bytes)
  constexpr unsigned kXStep = S::kWElems * 2 / 16;
  constexpr int kWCopies = kTileRows * 8 / kThreads;
  constexpr int kXCopies = S::kRows * 8 / kThreads;

  // Step i of the range is chunk (range_begin + i) % chunks of tile
  // (range_begin + i) / chunks, in stage i % kStages. This thread copies W
  // tile row idx / 8 and x row idx / 8, 16-byte column idx % 8, for
  // idx = tid + copy * kThreads.
  auto loadW = [&](int i) {
    const int64_t u = range_begin + i, tile = u / chunks;
    const int64_t col = (u % chunks) * kChunkK;
    T *stage = smem + (i % kStages) * S::kStageElems;
#pragma unroll
    for (int copy = 0; copy < kWCopies; ++copy) {
      const int idx = tid + copy * kThreads, r = idx / 8, c = idx % 8;
      const int64_t row = weightRow(a, swiglu, tile, r);
      kernels::cpAsync16(stage + kernels::wgmmaTileOffset(kTileRows, r, c),
                         static_cast<const T *>(a.w) + (row >= 0 ? row : 0) * a.k + col + c * 8,
                         row >= 0);
    }
  };
  auto loadX = [&](int i) {
    const int64_t col = ((range_begin + i) % chunks) * kChunkK;
    T *stage = smem + (i % kStages) * S::kStageElems + S::kWElems;
#pragma unroll
    for (int copy = 0; copy < kXCopies; ++copy) {
      const int idx = tid + copy * kThreads, r = idx / 8, c = idx % 8;
      kernels::cpAsync16(stage + kernels::wgmmaTileOffset(S::kRows, r, c),
                         static_cast<const T *>(a.x) + (r < a.m ? r : 0) * a.k + col + c * 8,
                         r < a.m);
    }
  };

  // The weights are constant: the first chunks go out before the wait for
  // the previous kernel (which wrote x).
  for (int i = 0; i < kAhead; ++i)
    if (i < steps)
      loadW(i);
  pdlWait();
  for (int i = 0; i < kAhead; ++i) {
    if (i < steps)
      loadX(i);
    kernels::cpAsyncCommit();
  }

  float acc[kJ][4];
#pragma unroll
  for (int j = 0; j < kJ; ++j)
    acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  // A segment: this CTA's consecutive steps of one tile. The step loop
  // runs inside the segment loop, so the accumulators are read after it on
  // a path every thread takes (a `continue` out of one flat loop made ptxas
  // serialize every wgmma: C7517/C7518).
  for (int i = 0; i < steps;) {
    const int64_t u0 = range_begin + i;
    const int segment_steps = static_cast<int>(
        min(static_cast<int64_t>(chunks - u0 % chunks), static_cast<int64_t>(steps - i)));
    for (int s = 0; s < segment_steps; ++s, ++i) {
      // Every iteration commits one cp.async group, empty or not, so "step i
      // landed" is always "at most kAhead - 1 groups pending".
      kernels::cpAsyncWait<kAhead - 1>(); // step i, this thread's copies
      kernels::fenceProxyAsyncShared();
      __syncthreads(); // everyone's copies; every warp is past step i - 2's wgmma
      if (i + kAhead < steps) {
        loadW(i + kAhead); // into step i - 2's stage
        loadX(i + kAhead);
      }
      kernels::cpAsyncCommit();
      const unsigned long long da = desc_base + (i % kStages) * kStageStep, db = da + kXStep;
      kernels::pinRegisters(acc);
      kernels::wgmmaFence();
#pragma unroll
      for (int kk = 0; kk < kChunkK / 16; ++kk) // 32 bytes a k16 step
        wgmmaStep<T, kTok>(acc, da + kk * 2, db + kk * 2, kk > 0 || s > 0);
      kernels::wgmmaCommit();
      kernels::wgmmaWait<1>();
      kernels::pinRegisters(acc);
    }
    // The segment of tile u0 / chunks ends here: finish it while the ring
    // keeps streaming the next one.
    kernels::wgmmaWait<0>();
    kernels::pinRegisters(acc);
    // The segment's sum leaves the accumulators here, on the CTA-uniform
    // path; what follows branches on the last-part flag and touches only
    // the copy.
    float sum[kJ][4];
#pragma unroll
    for (int j = 0; j < kJ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        sum[j][e] = acc[j][e];
    const int64_t tile = u0 / chunks;
    bool store = segment_steps == chunks;
    if (!store) {
      float4 *mine = reinterpret_cast<float4 *>(partials + StreamK::slot(cta, tile) * kElems);
#pragma unroll
      for (int j = 0; j < kJ; ++j)
        __stcg(mine + j * kThreads + tid, make_float4(sum[j][0], sum[j][1], sum[j][2], sum[j][3]));
      // The barrier, then thread 0's acquire-release count: it publishes the
      // CTA's partial and, in the tile's last CTA, shows it the others' (to
      // every thread, behind the second barrier); no fence a thread.
      __syncthreads();
      const int64_t first = schedule.firstCta(tile, chunks);
      const int64_t parts = schedule.parts(tile, chunks);
      if (tid == 0)
        is_last = kernels::atomicAddAcqRelGpu(&counters[tile], 1u) == static_cast<unsigned>(parts) - 1;
      __syncthreads();
      store = is_last != 0;
      if (store) {
#pragma unroll
        for (int j = 0; j < kJ; ++j)
          sum[j][0] = sum[j][1] = sum[j][2] = sum[j][3] = 0.0f;
        for (int64_t p0 = 0; p0 < parts; p0 += kPartsInFlight) {
          float4 add[kPartsInFlight][kJ];
#pragma unroll
          for (int q = 0; q < kPartsInFlight; ++q) {
            const float4 *theirs = reinterpret_cast<const float4 *>(
                partials + StreamK::slot(first + p0 + q, tile) * kElems);
#pragma unroll
            for (int j = 0; j < kJ; ++j)
              add[q][j] = p0 + q < parts ? __ldcg(theirs + j * kThreads + tid)
                                         : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          }
#pragma unroll
          for (int q = 0; q < kPartsInFlight; ++q) // in CTA order
#pragma unroll
            for (int j = 0; j < kJ; ++j) {
              sum[j][0] += add[q][j].x;
              sum[j][1] += add[q][j].y;
              sum[j][2] += add[q][j].z;
              sum[j][3] += add[q][j].w;
            }
        }
        if (tid == 0)
          counters[tile] = 0; // ready for the next launch (and graph replays)
      }
    }
    if (store)
      storeTile<kTok>(a, swiglu, tile, sum);
  }
  kernels::cpAsyncWait<0>(); // nothing is pending; no copy outlives the CTA
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
         (a.epilogue != GemvEpilogue::kResidualAdd || a.residual) && !a.norm &&
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
