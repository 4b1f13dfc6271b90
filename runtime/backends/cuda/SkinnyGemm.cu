//===- SkinnyGemm.cu - Decode GEMMs of a few dozen rows on tensor cores ---===//
//
// A warp owns a group of 16 weight rows (8 gate rows and their 8 up rows for
// SwiGLU, so one lane holds both halves of its outputs) and a slice of K,
// and computes them against up to kTiles tiles of 8 input rows with
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
// Above 8 rows (two or more tiles) x is staged in shared memory instead
// (stagedSkinnyGemmKernel): measured on the H200 (device run 16), reading
// every tile's x fragment from L1/L2 right before its mma made the m = 32
// kernel stream Llama-3-8B's gate/up at 1.7 TB/s. There each K slice of the
// block copies its x columns in chunks of 128 (cp.async, double-buffered,
// rows padded so a quarter-warp's 16-byte reads hit distinct banks), and the
// weights stream through registers kUnroll blocks ahead as before.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/ElementAccess.cuh"
#include "runtime/backends/cuda/Launch.cuh"
#include "runtime/backends/cuda/SkinnyGemm.h"

#include <algorithm>
#include <array>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace txc::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 4;  // K blocks in flight per lane
constexpr int kBlockK = 32; // K elements per pair of mma k16 steps

/// A group's epilogue. Accumulator e of a tile: weight row (e < 2 ? row0 :
/// row1), input row tile * 8 + 2t + e % 2.
template <int kTiles>
__device__ __forceinline__ void storeTiles(const GemvArgs &a, bool swiglu, int64_t group,
                                           int64_t row0, int64_t row1, int r, int t,
                                           const float (&acc)[kTiles][4]) {
  const float bias0 = a.bias && row0 < a.n ? ld(a.bias, a.bias_type, row0) : 0.0f;
  const float bias1 = a.bias && row1 < a.n ? ld(a.bias, a.bias_type, row1) : 0.0f;
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
      const bool residual = a.epilogue == GemvEpilogue::kResidualAdd;
      if (row0 < a.n)
        st(a.out, a.out_type, token * a.n + row0,
           g + (residual ? ld(a.residual, a.out_type, token * a.n + row0) : 0.0f));
      if (row1 < a.n)
        st(a.out, a.out_type, token * a.n + row1,
           u + (residual ? ld(a.residual, a.out_type, token * a.n + row1) : 0.0f));
    }
}

/// The K slices of a group (consecutive warps) meet in `partial`
/// ([kWarps][kTiles * 4][32] floats): the first slice's warp gets the sums,
/// in slice order (deterministic), and true; the others get false.
template <int kTiles>
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

template <typename T, int kTiles>
__global__ void __launch_bounds__(kWarps * 32)
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
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (kb + u >= kb_end)
        break;
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
        const int64_t token = tile * 8 + r;
        uint4 xv = make_uint4(0, 0, 0, 0);
        if (token < a.m)
          xv = __ldg(x + token * row_vecs + (kb + u) * 4);
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
  if (!sumSlices<kTiles>(&partial[0][0][0], slices, acc))
    return;
  if (valid)
    storeTiles<kTiles>(a, swiglu, group, row0, row1, r, t, acc);
}

// --- more than 8 rows: x staged in shared memory ---------------------------

constexpr int kChunkK = kUnroll * kBlockK; // x columns per staged chunk (128)
// 32 elements of padding: a 320-byte row stride puts consecutive rows 16
// banks apart, so the 8 lanes of a quarter-warp (rows r, r+1; 4 lanes each)
// read 128 distinct bytes.
constexpr int kRowPad = 32;
constexpr int kRowElems = kChunkK + kRowPad;
constexpr int kMaxStagedRows = 128; // slices x padded rows, per buffer: 40 KB

template <typename T, int kTiles>
__global__ void __launch_bounds__(kWarps * 32)
    stagedSkinnyGemmKernel(const GemvArgs a, const int slices) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kRows = kTiles * 8;
  pdlLaunchDependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int r = lane / 4, t = lane % 4;
  const int slice = warp % slices;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t groups = swiglu ? a.n / 16 : (a.n + 15) / 16;
  const int64_t group = static_cast<int64_t>(blockIdx.x) * (kWarps / slices) + warp / slices;
  const bool valid = group < groups;
  const int64_t row0 = swiglu ? group * 8 + r : group * 16 + r;
  const int64_t row1 = swiglu ? a.n / 2 + group * 8 + r : row0 + 8;
  const int64_t row_vecs = a.k / 8;
  const int64_t kb_per_slice = a.k / kBlockK / slices; // a multiple of kUnroll
  const int chunks = static_cast<int>(kb_per_slice / kUnroll);
  const int64_t kb_begin = slice * kb_per_slice;
  const uint4 *w = static_cast<const uint4 *>(a.w);
  const uint4 *w0 = w + (valid ? min(row0, a.n - 1) : 0) * row_vecs + t;
  const uint4 *w1 = w + (valid ? min(row1, a.n - 1) : 0) * row_vecs + t;
  T *staged = reinterpret_cast<T *>(smem); // [2][slices][kRows][kRowElems]
  auto buffer = [&](int b, int s) {
    return staged + (static_cast<int64_t>(b) * slices + s) * kRows * kRowElems;
  };
  // Chunk c of every slice's x columns into buffer b; rows past m are zeros.
  auto stage = [&](int c, int b) {
    constexpr int kVecs = kChunkK / 8;
    const int total = slices * kRows * kVecs;
    const T *x = static_cast<const T *>(a.x);
    for (int i = threadIdx.x; i < total; i += kWarps * 32) {
      const int v = i % kVecs, row = (i / kVecs) % kRows, s = i / (kVecs * kRows);
      const bool in = row < a.m;
      const int64_t col = (s * kb_per_slice + static_cast<int64_t>(c) * kUnroll) * kBlockK + v * 8;
      kernels::cpAsync16(buffer(b, s) + row * kRowElems + v * 8, x + (in ? row * a.k + col : 0),
                         in);
    }
    kernels::cpAsyncCommit();
  };

  // Weights are constant: the first chunk's blocks go out before the wait.
  uint4 w0r[kUnroll], w1r[kUnroll];
  if (valid)
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      w0r[u] = __ldcs(w0 + (kb_begin + u) * 4);
      w1r[u] = __ldcs(w1 + (kb_begin + u) * 4);
    }
  pdlWait();
  stage(0, 0);
  float acc[kTiles][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
    acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) {
      stage(c + 1, (c + 1) & 1);
      kernels::cpAsyncWait<1>();
    } else {
      kernels::cpAsyncWait<0>();
    }
    __syncthreads();
    const T *xs = buffer(c & 1, slice) + r * kRowElems + 8 * t;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (valid) {
        const unsigned first[4] = {w0r[u].x, w1r[u].x, w0r[u].y, w1r[u].y};
        const unsigned second[4] = {w0r[u].z, w1r[u].z, w0r[u].w, w1r[u].w};
#pragma unroll
        for (int tile = 0; tile < kTiles; ++tile) {
          const uint4 xv =
              *reinterpret_cast<const uint4 *>(xs + tile * 8 * kRowElems + u * kBlockK);
          kernels::mma16816<T>(acc[tile], first, xv.x, xv.y);
          kernels::mma16816<T>(acc[tile], second, xv.z, xv.w);
        }
        // This register is free again: the same block of the next chunk.
        if (c + 1 < chunks) {
          const int64_t kb = kb_begin + static_cast<int64_t>(c + 1) * kUnroll + u;
          w0r[u] = __ldcs(w0 + kb * 4);
          w1r[u] = __ldcs(w1 + kb * 4);
        }
      }
    }
    __syncthreads(); // buffer c & 1 takes chunk c + 2 next
  }
  // The staging buffers are free now: the slices meet there.
  if (!sumSlices<kTiles>(reinterpret_cast<float *>(smem), slices, acc))
    return;
  if (valid)
    storeTiles<kTiles>(a, swiglu, group, row0, row1, r, t, acc);
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

/// K slices per group: enough warps to keep the weight stream in flight on
/// every SM, each slice at least one round of kUnroll K blocks.
int slicesFor(int64_t groups, int64_t blocks) {
  const int64_t kTargetWarps = int64_t{smCount()} * 32;
  int slices = 1;
  while (slices < kWarps && groups * slices * 2 <= kTargetWarps && blocks / (2 * slices) >= kUnroll)
    slices *= 2;
  return slices;
}

/// Whether the staged kernel takes m rows at K with some slice count: K a
/// multiple of one chunk (128), more than 8 rows.
bool stagedSupports(const GemvArgs &a) { return a.m > 8 && a.k % kChunkK == 0; }

template <typename T, int kTiles> cudaError_t launchStaged(const GemvArgs &a, cudaStream_t stream) {
  constexpr int kRows = kTiles * 8;
  auto kernel = stagedSkinnyGemmKernel<T, kTiles>;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t groups = swiglu ? a.n / 16 : (a.n + 15) / 16;
  const int64_t kb = a.k / kBlockK;
  auto smemBytes = [&](int slices) {
    const size_t staging = size_t{2} * slices * kRows * kRowElems * sizeof(T);
    const size_t partial = size_t{kWarps} * kTiles * 4 * 32 * sizeof(float);
    return std::max(staging, partial);
  };
  // Resident blocks per SM at 1, 2, 4 and 8 slices, asked once per kernel:
  // these launches are on the decode path.
  static const std::array<int, 4> blocks_per_sm = [&] {
    std::array<int, 4> per_sm{};
    if (cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
            static_cast<int>(size_t{2} * kMaxStagedRows * kRowElems * sizeof(T))) != cudaSuccess)
      return per_sm;
    for (int i = 0; i < 4; ++i)
      if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm[i], kernel, kWarps * 32,
                                                        smemBytes(1 << i)) != cudaSuccess)
        per_sm[i] = 0;
    return per_sm;
  }();
  if (blocks_per_sm[0] == 0)
    return cudaErrorInvalidConfiguration;
  // The slice count whose grid fills the resident block slots best (a
  // partial last wave counts as idle slots); ties go to fewer slices.
  int best_slices = 1;
  double best_fill = -1.0;
  for (int slices = 1; slices <= kWarps; slices *= 2) {
    if (slices * kRows > kMaxStagedRows || kb % (slices * kUnroll) != 0)
      continue;
    const int per_sm = blocks_per_sm[slices == 1 ? 0 : slices == 2 ? 1 : slices == 4 ? 2 : 3];
    const int64_t slots = int64_t{smCount()} * std::max(per_sm, 1);
    const int64_t blocks = (groups * slices + kWarps - 1) / kWarps;
    const int64_t waves = (blocks + slots - 1) / slots;
    const double fill = static_cast<double>(blocks) / static_cast<double>(waves * slots);
    if (fill > best_fill + 1e-9) {
      best_fill = fill;
      best_slices = slices;
    }
  }
  const int64_t groups_per_block = kWarps / best_slices;
  const dim3 grid(static_cast<unsigned>((groups + groups_per_block - 1) / groups_per_block));
  return launchKernel(kernel, grid, dim3(kWarps * 32), smemBytes(best_slices), stream, a.pdl, a,
                      best_slices);
}

template <typename T> cudaError_t launchTyped(const GemvArgs &a, cudaStream_t stream) {
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t groups = swiglu ? a.n / 16 : (a.n + 15) / 16;
  const int slices = slicesFor(groups, a.k / kBlockK);
  const int64_t groups_per_block = kWarps / slices;
  const dim3 grid(static_cast<unsigned>((groups + groups_per_block - 1) / groups_per_block));
  const dim3 block(kWarps * 32);
  if (stagedSupports(a)) {
    if (a.m <= 16)
      return launchStaged<T, 2>(a, stream);
    if (a.m <= 32)
      return launchStaged<T, 4>(a, stream);
    return launchStaged<T, 8>(a, stream);
  }
  if (a.m <= 8)
    return launchKernel(skinnyGemmKernel<T, 1>, grid, block, 0, stream, a.pdl, a, slices);
  if (a.m <= 16)
    return launchKernel(skinnyGemmKernel<T, 2>, grid, block, 0, stream, a.pdl, a, slices);
  if (a.m <= 32)
    return launchKernel(skinnyGemmKernel<T, 4>, grid, block, 0, stream, a.pdl, a, slices);
  return launchKernel(skinnyGemmKernel<T, 8>, grid, block, 0, stream, a.pdl, a, slices);
}

bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

} // namespace

bool skinnyGemmSupports(const GemvArgs &a) {
  return (a.type == EType::kBF16 || a.type == EType::kF16) &&
         (a.out_type == a.type || a.out_type == EType::kF32) && a.m >= 1 &&
         a.m <= kSkinnyGemmMaxRows && a.n >= 1 && a.k >= kBlockK && a.k % kBlockK == 0 &&
         aligned16(a.x) && aligned16(a.w) &&
         (a.epilogue != GemvEpilogue::kSwiglu || a.n % 16 == 0) &&
         (a.epilogue != GemvEpilogue::kResidualAdd || a.residual) && !a.norm_weight &&
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
