//===- SkinnyGemm.cu - Decode GEMMs of 3-8 rows on tensor cores ---------===//
//
// A warp owns a group of 16 weight rows (8 gate rows and their 8 up rows for
// SwiGLU, so one lane holds both halves of its outputs) and a slice of K,
// and computes them against one tile of up to 8 input rows with
// mma.sync.m16n8k16 (fp32 accumulation).
//
// Fragments straight from global memory: in each 32-element block of K,
// lane (r = lane / 4, t = lane % 4) loads elements [8t, 8t + 8) of weight
// rows r and r + 8 (16 bytes each; four lanes cover a row's 64 contiguous
// bytes) and of input row r of each tile. The PTX fragment layout wants
// logical k {2t, 2t+1, 2t+8, 2t+9} in a lane; the first mma takes physical
// {8t, 8t+1, 8t+2, 8t+3} as those, the second {8t+4 .. 8t+7}. A and B use
// the same map, so the sum over K is the same sum in another order.
//
// The K slices of a group meet in shared memory, in slice order
// (deterministic); the first slice's warp applies the epilogue and stores.
//
// Above 8 rows cuBLASLt wins (skinnyGemmRowLimit): device runs 16 and 23
// measured this kernel at m = 32, and a variant staging x in shared memory
// per K slice, at 1.7-2.0 TB/s on Llama-3-8B's gate/up, 2x cuBLASLt's step.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/ElementAccess.cuh"
#include "runtime/backends/cuda/Launch.cuh"
#include "runtime/backends/cuda/SkinnyGemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace txc::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 4;  // K blocks in flight per lane
constexpr int kBlockK = 32; // K elements per pair of mma k16 steps
constexpr int kTiles = 1;   // mma tiles of 8 input rows (kSkinnyGemmMaxRows)

/// A group's epilogue. Accumulator e of a tile: weight row (e < 2 ? row0 :
/// row1), input row tile * 8 + 2t + e % 2.
__device__ __forceinline__ void storeTiles(const GemvArgs &a, bool swiglu, int64_t group,
                                           int64_t row0, int64_t row1, int r, int t,
                                           const float (&acc)[kTiles][4]) {
  float bias0 = 0.0f, bias1 = 0.0f;
  auto biases = [&](auto stored) { // both asked for, then converted
    using R = decltype(stored);
    const R *bias = static_cast<const R *>(a.bias);
    const R b0 = row0 < a.n ? bias[row0] : R(0.0f), b1 = row1 < a.n ? bias[row1] : R(0.0f);
    bias0 = static_cast<float>(b0);
    bias1 = static_cast<float>(b1);
  };
  if (a.bias)
    withStoredType(a.bias_type, biases);
  // The residuals asked for together, as stored, before any is converted:
  // one round trip (withStoredType).
  float res[kTiles][2][2] = {};
  auto gather = [&](auto stored) {
    using R = decltype(stored);
    const R *residual = static_cast<const R *>(a.residual);
    R raw[kTiles][2][2];
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t token = tile * 8 + 2 * t + j;
        raw[tile][j][0] = token < a.m && row0 < a.n ? residual[token * a.n + row0] : R(0.0f);
        raw[tile][j][1] = token < a.m && row1 < a.n ? residual[token * a.n + row1] : R(0.0f);
      }
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          res[tile][j][h] = static_cast<float>(raw[tile][j][h]);
  };
  if (!swiglu && a.epilogue == GemvEpilogue::kResidualAdd)
    withStoredType(a.out_type, gather);
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t token = tile * 8 + 2 * t + j;
      if (token >= a.m)
        continue;
      const float g = acc[tile][j] + bias0, u = acc[tile][2 + j] + bias1;
      if (swiglu) {
        st(a.out, a.out_type, token * (a.n / 2) + group * 8 + r, g / (1.0f + expf(-g)) * u);
        continue;
      }
      if (row0 < a.n)
        st(a.out, a.out_type, token * a.n + row0, g + res[tile][j][0]);
      if (row1 < a.n)
        st(a.out, a.out_type, token * a.n + row1, u + res[tile][j][1]);
    }
}

/// The K slices of a group (consecutive warps) meet in `partial`
/// ([kWarps][kTiles * 4][32] floats): the first slice's warp gets the sums,
/// in slice order (deterministic), and true; the others get false.
__device__ __forceinline__ bool sumSlices(float *partial, int slices, float (&acc)[kTiles][4]) {
  if (slices == 1)
    return true;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  auto at = [&](int w, int tile, int e) -> float & {
    return partial[(w * kTiles * 4 + tile * 4 + e) * 32 + lane];
  };
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      at(warp, tile, e) = acc[tile][e];
  __syncthreads();
  if (warp % slices != 0)
    return false;
#pragma unroll
  for (int tile = 0; tile < kTiles; ++tile)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float sum = 0.0f;
      for (int s = 0; s < slices; ++s)
        sum += at(warp + s, tile, e);
      acc[tile][e] = sum;
    }
  return true;
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32, 2)
    skinnyGemmKernel(const GemvArgs a, const int slices) {
  __shared__ float partial[kWarps][kTiles * 4][32];
  pdlLaunchDependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int r = lane / 4, t = lane % 4;
  const int slice = warp % slices;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t groups = swiglu ? a.n / 16 : (a.n + 15) / 16;
  const int64_t group = static_cast<int64_t>(blockIdx.x) * (kWarps / slices) + warp / slices;
  const bool valid = group < groups;
  // This lane's two weight rows: r and r + 8 of the group (for SwiGLU the
  // gate row and its up row).
  const int64_t row0 = swiglu ? group * 8 + r : group * 16 + r;
  const int64_t row1 = swiglu ? a.n / 2 + group * 8 + r : row0 + 8;
  const int64_t blocks = a.k / kBlockK;
  const int64_t kb_begin = valid ? blocks * slice / slices : 0;
  const int64_t kb_end = valid ? blocks * (slice + 1) / slices : 0;
  const uint4 *w = static_cast<const uint4 *>(a.w);
  const int64_t row_vecs = a.k / 8; // 16-byte chunks per row
  const uint4 *w0 = w + (valid ? min(row0, a.n - 1) : 0) * row_vecs + t;
  const uint4 *w1 = w + (valid ? min(row1, a.n - 1) : 0) * row_vecs + t;
  const uint4 *x = static_cast<const uint4 *>(a.x) + t;

  auto load = [&](int64_t kb, uint4(&into0)[kUnroll], uint4(&into1)[kUnroll]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (kb + u < kb_end) {
        into0[u] = __ldcs(w0 + (kb + u) * 4);
        into1[u] = __ldcs(w1 + (kb + u) * 4);
      }
  };
  float acc[kTiles][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
    acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
  // Weights are constant: the first loads go out before the wait for the
  // previous kernel, which wrote x.
  uint4 cur0[kUnroll], cur1[kUnroll];
  load(kb_begin, cur0, cur1);
  pdlWait();
  for (int64_t kb = kb_begin; kb < kb_end; kb += kUnroll) {
    uint4 next0[kUnroll], next1[kUnroll];
    load(kb + kUnroll, next0, next1);
    // The pass's input chunks asked for at once, then the MMAs: loaded where
    // used, each chunk's load went out after the MMA before it, which waits
    // for its data (kUnroll L2 round trips a pass in series; the one-row
    // GEMV's run 190).
    uint4 xs[kUnroll][kTiles];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
        const int64_t token = tile * 8 + r;
        xs[u][tile] = token < a.m && kb + u < kb_end ? __ldg(x + token * row_vecs + (kb + u) * 4)
                                                     : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (kb + u >= kb_end)
        break;
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
        const uint4 xv = xs[u][tile];
        const unsigned first[4] = {cur0[u].x, cur1[u].x, cur0[u].y, cur1[u].y};
        const unsigned second[4] = {cur0[u].z, cur1[u].z, cur0[u].w, cur1[u].w};
        kernels::mma16816<T>(acc[tile], first, xv.x, xv.y);
        kernels::mma16816<T>(acc[tile], second, xv.z, xv.w);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      cur0[u] = next0[u];
      cur1[u] = next1[u];
    }
  }
  if (!sumSlices(&partial[0][0][0], slices, acc))
    return;
  if (valid)
    storeTiles(a, swiglu, group, row0, row1, r, t, acc);
}

/// K slices per group: enough warps to keep the weight stream in flight on
/// every SM, each slice at least one round of kUnroll K blocks.
int slicesFor(int64_t groups, int64_t blocks) {
  const int64_t kTargetWarps = int64_t{smCount()} * 32;
  int slices = 1;
  while (slices < kWarps && groups * slices * 2 <= kTargetWarps && blocks / (2 * slices) >= kUnroll)
    slices *= 2;
  return slices;
}

template <typename T> cudaError_t launchTyped(const GemvArgs &a, cudaStream_t stream) {
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t groups = swiglu ? a.n / 16 : (a.n + 15) / 16;
  const int slices = slicesFor(groups, a.k / kBlockK);
  const int64_t groups_per_block = kWarps / slices;
  const dim3 grid(static_cast<unsigned>((groups + groups_per_block - 1) / groups_per_block));
  const dim3 block(kWarps * 32);
  return launchKernel(skinnyGemmKernel<T>, grid, block, 0, stream, a.pdl, a, slices);
}

} // namespace

bool skinnyGemmSupports(const GemvArgs &a) {
  return (a.type == EType::kBF16 || a.type == EType::kF16) &&
         (a.out_type == a.type || a.out_type == EType::kF32) && a.m >= 1 &&
         a.m <= kSkinnyGemmMaxRows && a.n >= 1 && a.k >= kBlockK && a.k % kBlockK == 0 &&
         aligned16(a.x) && aligned16(a.w) &&
         (a.epilogue != GemvEpilogue::kSwiglu || a.n % 16 == 0) &&
         (a.epilogue != GemvEpilogue::kResidualAdd || a.residual) && !a.norm &&
         !a.rope_counters;
}

cudaError_t launchSkinnyGemm(const GemvArgs &a, cudaStream_t stream) {
  if (!skinnyGemmSupports(a))
    return cudaErrorInvalidValue;
  if (a.type == EType::kBF16)
    return launchTyped<__nv_bfloat16>(a, stream);
  return launchTyped<__half>(a, stream);
}

} // namespace txc::cuda
