//===- DecodeGemm.cu - Decode-batch GEMMs on wgmma ------------------------===//
//
// Grid (tile, K slice), one warpgroup a CTA. A tile is 64 weight rows (for
// SwiGLU 32 gate rows and the matching 32 up rows, so the epilogue has both
// halves of its outputs); the batch (up to 32 or 64 rows, zero-filled past
// m) is the wgmma N operand. Both operands are K-major in 128-byte-swizzled
// shared memory (attention/wgmma.cuh), one 64-wide column block per stage.
//
// Pipeline, per chunk c of the slice's K: wait for chunk c's copies, fence
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

#include "attention/sm90_pipeline.cuh"
#include "attention/wgmma.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace txc::cuda {

namespace {

constexpr int kThreads = 128;       // one warpgroup
constexpr int kTileRows = 64;       // weight rows a tile: the wgmma M
constexpr int kChunkK = 64;         // K a stage: one 128-byte column block
constexpr int kStages = 6;          //
constexpr int kAhead = kStages - 2; // chunks requested ahead of the one in use
constexpr int kMaxSlices = 8;

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

template <typename T, int kTok>
__global__ void __launch_bounds__(kThreads)
    decodeGemmKernel(const GemvArgs a, const int slices, float *partials, unsigned *counters) {
  using S = Shape<kTok>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char *smem_base = smem_raw + ((1024 - kernels::smemAddress(smem_raw) % 1024) % 1024);
  T *smem = reinterpret_cast<T *>(smem_base);
  pdlLaunchDependents();
  const int tid = threadIdx.x;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t tile = blockIdx.x;
  const int slice = blockIdx.y;
  const int64_t chunks = a.k / kChunkK / slices; // this slice's
  const int64_t k0 = slice * chunks * kChunkK;

  // This thread's copies of a chunk: W row idx / 8 and x row idx / 8, each
  // 16-byte chunk idx % 8, for idx = tid + i * kThreads.
  constexpr int kWCopies = kTileRows * 8 / kThreads;
  constexpr int kXCopies = S::kRows * 8 / kThreads;
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
    w_src[i] = static_cast<const T *>(a.w) + (row >= 0 ? row : 0) * a.k + k0 + c * 8;
    w_dst[i] = kernels::wgmmaTileOffset(kTileRows, r, c);
  }
#pragma unroll
  for (int i = 0; i < kXCopies; ++i) {
    const int idx = tid + i * kThreads, r = idx / 8, c = idx % 8;
    x_valid[i] = r < a.m;
    x_src[i] = static_cast<const T *>(a.x) + (r < a.m ? r : 0) * a.k + k0 + c * 8;
    x_dst[i] = S::kWElems + kernels::wgmmaTileOffset(S::kRows, r, c);
  }
  auto loadW = [&](int64_t chunk) {
    T *stage = smem + (chunk % kStages) * S::kStageElems;
#pragma unroll
    for (int i = 0; i < kWCopies; ++i)
      kernels::cpAsync16(stage + w_dst[i], w_src[i] + chunk * kChunkK, w_valid[i]);
  };
  auto loadX = [&](int64_t chunk) {
    T *stage = smem + (chunk % kStages) * S::kStageElems;
#pragma unroll
    for (int i = 0; i < kXCopies; ++i)
      kernels::cpAsync16(stage + x_dst[i], x_src[i] + chunk * kChunkK, x_valid[i]);
  };

  // The weights are constant: the first chunks' go out before the wait.
  for (int c = 0; c < kAhead; ++c)
    if (c < chunks)
      loadW(c);
  pdlWait();
  for (int c = 0; c < kAhead; ++c) {
    if (c < chunks)
      loadX(c);
    kernels::cpAsyncCommit();
  }

  float acc[4 * kTok][4];
#pragma unroll
  for (int j = 0; j < 4 * kTok; ++j)
    acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  // Descriptors move by their start address only (the low field, bytes / 16).
  const unsigned long long desc0 = kernels::wgmmaDescriptorK128(kernels::smemAddress(smem));
  constexpr unsigned kStageStep = S::kStageElems * 2 / 16;
  constexpr unsigned kXStep = S::kWElems * 2 / 16;
  for (int64_t c = 0; c < chunks; ++c) {
    kernels::cpAsyncWait<kAhead - 1>(); // chunk c, this thread's copies
    kernels::fenceProxyAsyncShared();
    __syncthreads(); // everyone's copies; every warp is past chunk c - 2's wgmma
    if (c + kAhead < chunks) {
      loadW(c + kAhead);
      loadX(c + kAhead);
    }
    kernels::cpAsyncCommit();
    const unsigned long long da = desc0 + (c % kStages) * kStageStep, db = da + kXStep;
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
  kernels::cpAsyncWait<0>();
  __syncthreads(); // the stages are free: the accumulators go there

  // Warp w holds tile rows 16w..16w+15 of each n8 column tile j, in the
  // mma.sync m16n8 order.
  float *tile_acc = reinterpret_cast<float *>(smem_base); // [kTileRows][kLd]
  {
    const int warp = tid / 32, lane = tid % 32, group = lane / 4, quad = lane % 4;
#pragma unroll
    for (int j = 0; j < 4 * kTok; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        tile_acc[(warp * 16 + group + (e >= 2 ? 8 : 0)) * S::kLd + j * 8 + quad * 2 + (e & 1)] =
            acc[j][e];
  }
  __syncthreads();

  if (slices > 1) {
    // Partials out; the tile's last CTA sums them in slice order.
    constexpr int kElems = kTileRows * S::kRows;
    float *mine = partials + (tile * slices + slice) * kElems;
    for (int idx = tid; idx < kElems; idx += kThreads)
      mine[idx] = tile_acc[(idx / S::kRows) * S::kLd + idx % S::kRows];
    unsigned *is_last = reinterpret_cast<unsigned *>(tile_acc + kTileRows * S::kLd);
    __threadfence();
    __syncthreads();
    if (tid == 0)
      *is_last = atomicAdd(&counters[tile], 1u) == static_cast<unsigned>(slices) - 1;
    __syncthreads();
    if (!*is_last)
      return;
    __threadfence();
    const float *all = partials + tile * slices * kElems;
    for (int idx = tid; idx < kElems; idx += kThreads) {
      float sum = 0.0f;
      for (int s = 0; s < slices; ++s)
        sum += __ldcg(all + s * kElems + idx);
      tile_acc[(idx / S::kRows) * S::kLd + idx % S::kRows] = sum;
    }
    if (tid == 0)
      counters[tile] = 0; // ready for the next launch (and graph replays)
    __syncthreads();
  }

  // The epilogue, features fastest (coalesced stores).
  const int features = swiglu ? 32 : kTileRows;
  for (int idx = tid; idx < features * S::kRows; idx += kThreads) {
    const int i = idx % features;
    const int64_t token = idx / features;
    if (token >= a.m)
      break;
    if (swiglu) {
      const int64_t g_row = tile * 32 + i, u_row = a.n / 2 + g_row;
      const float g =
          tile_acc[i * S::kLd + token] + (a.bias ? ld(a.bias, a.bias_type, g_row) : 0.0f);
      const float u =
          tile_acc[(32 + i) * S::kLd + token] + (a.bias ? ld(a.bias, a.bias_type, u_row) : 0.0f);
      st(a.out, a.out_type, token * (a.n / 2) + g_row, g / (1.0f + expf(-g)) * u);
      continue;
    }
    const int64_t row = tile * kTileRows + i;
    if (row >= a.n)
      continue;
    float v = tile_acc[i * S::kLd + token] + (a.bias ? ld(a.bias, a.bias_type, row) : 0.0f);
    if (a.epilogue == GemvEpilogue::kResidualAdd)
      v += ld(a.residual, a.out_type, token * a.n + row);
    st(a.out, a.out_type, token * a.n + row, v);
  }
}

int smCount() {
  static const int count = [] {
    int device = 0, sms = 132;
    if (cudaGetDevice(&device) == cudaSuccess)
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    return sms;
  }();
  return count;
}

template <typename T, int kTok>
cudaError_t launchTyped(const GemvArgs &a, const DecodeGemmWorkspace &ws, cudaStream_t stream) {
  using S = Shape<kTok>;
  auto kernel = decodeGemmKernel<T, kTok>;
  static const cudaError_t attribute =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
  if (attribute != cudaSuccess)
    return attribute;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t tiles = swiglu ? a.n / 64 : (a.n + kTileRows - 1) / kTileRows;
  const int64_t chunks = a.k / kChunkK;
  // K slices while the tiles cover fewer than two CTAs per SM, each slice
  // at least two rounds of the pipeline, the partials within the workspace.
  int slices = 1;
  while (slices < kMaxSlices && tiles * slices < 2 * smCount() && chunks % (2 * slices) == 0 &&
         chunks / (2 * slices) >= 2 * kAhead &&
         tiles * 2 * slices * kTileRows * S::kRows <= ws.partial_floats && tiles <= ws.num_counters)
    slices *= 2;
  return launchKernel(kernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(slices)),
                      dim3(kThreads), S::kSmemBytes, stream, a.pdl, a, slices, ws.partials,
                      ws.counters);
}

bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

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
