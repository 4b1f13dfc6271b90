//===- StagedGemv.cu - One-row GEMVs whose weights wait in shared memory --===//
//
// A block owns 16 weight rows, one m16 tile of an m16n8k16 tensor-core MMA:
// rows r0 .. r0 + 15, or for SwiGLU the gate rows j0 .. j0 + 7 over their up
// rows j0 + n/2 .. (so lane g's accumulator holds a gate and its up). Before
// the wait (W is constant) warp 0 has the TMA unit copy each row into shared
// memory in one bulk copy; after it the input row comes by cp.async, so the
// input costs one L2 round trip whatever k. The four warps split K, each
// walking its quarter in 16-wide steps over four independent accumulators
// (A from ldmatrix, B the input repeated in all 8 columns), and warp 0 sums
// the quarters in order and stores through GemvMath's epilogue. On the CUDA
// cores (the first version, device run 106) a warp's four rows took ~440
// serial instructions a warp after the wait, more than the input's round
// trip; here a warp issues k / 64 MMAs.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/StagedGemv.h"
#include "runtime/backends/cuda/GemvMath.cuh"
#include "runtime/backends/cuda/Launch.cuh"

#include "attention/sm90_pipeline.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace txc::cuda {

namespace {

using gemv::addSquares;
using gemv::scaleAndSquare;
using gemv::storePair;

constexpr int kStagedWarps = 4;
constexpr int kTileRows = 16;
constexpr int kChains = 4; // independent accumulators a warp
// A block's shared memory at most: two blocks of Qwen3-0.6B's down
// projection (16 rows of k = 3072) fit an SM's 227 KB.
constexpr int64_t kStagedMaxBlockBytes = 112 * 1024;

/// The tile's weight rows: padded by 16 bytes so that ldmatrix's eight row
/// addresses of a phase fall in different banks.
__host__ __device__ constexpr int64_t tileRowVecs(int64_t k) { return k / 8 + 1; }

/// Dynamic shared memory: the input row [k / 8 chunks], the norm weight
/// (with one), then the 16 rows of the tile.
template <typename T> __global__ void __launch_bounds__(kStagedWarps * 32) stagedGemvKernel(const GemvArgs a) {
  extern __shared__ __align__(16) uint4 staged[];
  __shared__ float partial[kStagedWarps][kTileRows];
  __shared__ float warp_squares[kStagedWarps];
  __shared__ __align__(8) unsigned long long weights_landed;
  if (!a.late_dependents)
    pdlLaunchDependents();
  kernels::traceEntry(a.trace);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t vecs = a.k / 8, row_vecs = tileRowVecs(a.k);
  const uint4 *gamma = static_cast<const uint4 *>(a.norm_weight);
  uint4 *x_staged = staged;
  uint4 *gamma_staged = staged + vecs;
  uint4 *tile = staged + (gamma ? 2 : 1) * vecs;
  // Tile row t's weight row, or -1 past the matrix.
  const int64_t first = static_cast<int64_t>(blockIdx.x) * (swiglu ? kTileRows / 2 : kTileRows);
  auto weightRow = [&](int t) -> int64_t {
    if (swiglu) {
      const int64_t j = first + t % (kTileRows / 2);
      return j < a.n / 2 ? j + (t < kTileRows / 2 ? 0 : a.n / 2) : -1;
    }
    return first + t < a.n ? first + t : -1;
  };

  // The rows (and the norm weight) by the TMA unit, one bulk copy a row from
  // lanes 0-16 of warp 0, counted on one mbarrier. Rows past the matrix stay
  // unwritten: their dots are never stored.
  if (threadIdx.x == 0) {
    kernels::mbarrierInit(&weights_landed, 1);
    kernels::mbarrierInitFence();
  }
  __syncthreads();
  if (warp == 0) {
    const unsigned row_bytes = static_cast<unsigned>(a.k * 2);
    int rows = 0;
    for (int t = 0; t < kTileRows; ++t)
      rows += weightRow(t) >= 0;
    if (lane == 0)
      kernels::mbarrierArriveExpectTx(&weights_landed, row_bytes * (rows + (gamma ? 1 : 0)));
    __syncwarp();
    const unsigned long long evict_first = kernels::l2EvictFirstPolicy(); // read once a step
    const int64_t row = lane < kTileRows ? weightRow(lane) : -1;
    if (row >= 0)
      kernels::bulkLoad(tile + lane * row_vecs, static_cast<const uint4 *>(a.w) + row * vecs, row_bytes,
                        &weights_landed, evict_first);
    if (gamma && lane == kTileRows)
      kernels::bulkLoad(gamma_staged, gamma, row_bytes, &weights_landed, evict_first);
  }

  pdlWait();
  if (a.late_dependents)
    pdlLaunchDependents();
  kernels::traceWaitRelease(a.trace);
  const uint4 *x = static_cast<const uint4 *>(a.x);
  for (int64_t v = threadIdx.x; v < vecs; v += kStagedWarps * 32)
    kernels::cpAsync16(x_staged + v, x + v);
  kernels::cpAsyncCommit();
  kernels::cpAsyncWait<0>();
  kernels::mbarrierWait(&weights_landed, 0);
  __syncthreads();

  // The fused norm: the squares of x, and with its weight x * w rounded to
  // T in place (GemvMath's scaleAndSquare), before any MMA reads x.
  float squares = 0.0f;
  if (a.norm) {
    for (int64_t v = threadIdx.x; v < vecs; v += kStagedWarps * 32) {
      uint4 xv = x_staged[v];
      if (gamma) {
        scaleAndSquare<T>(xv, gamma_staged[v], squares);
        x_staged[v] = xv;
      } else {
        addSquares<T>(xv, squares);
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      squares += __shfl_xor_sync(0xffffffffu, squares, o);
    if (lane == 0)
      warp_squares[warp] = squares;
    __syncthreads();
    squares = 0.0f;
    for (int i = 0; i < kStagedWarps; ++i) // in warp order: deterministic
      squares += warp_squares[i];
  }

  // This warp's quarter of K in 16-wide steps, step s on accumulator s % 4.
  float acc[kChains][4] = {};
  const int64_t steps = a.k / 16 / kStagedWarps, k0 = warp * steps * 16;
  const unsigned tile_addr =
      kernels::smemAddress(tile) + static_cast<unsigned>(((lane % 16) * row_vecs + (lane / 16)) * 16);
  const unsigned *x_words = reinterpret_cast<const unsigned *>(x_staged);
  const int q = lane % 4;
  for (int64_t s = 0; s < steps; s += kChains) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      const int64_t kk = k0 + (s + c) * 16;
      unsigned frag[4];
      kernels::ldmatrixX4(frag, tile_addr + static_cast<unsigned>(kk * 2));
      const unsigned b0 = x_words[kk / 2 + q], b1 = x_words[kk / 2 + q + 4];
      kernels::mma16816<T>(acc[c], frag, b0, b1);
    }
  }
  // Every column of C holds the dots: c[0] tile row lane / 4, c[2] that + 8.
  if (q == 0) {
    float lo = 0.0f, hi = 0.0f;
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      lo += acc[c][0];
      hi += acc[c][2];
    }
    partial[warp][lane / 4] = lo;
    partial[warp][lane / 4 + 8] = hi;
  }
  __syncthreads();
  if (warp == 0 && lane < kTileRows / 2) {
    float acc0[1] = {0.0f}, acc1[1] = {0.0f};
    for (int i = 0; i < kStagedWarps; ++i) { // in warp order: deterministic
      acc0[0] += partial[i][lane];
      acc1[0] += partial[i][lane + 8];
    }
    const float sq[1] = {squares};
    const int64_t row0 = weightRow(lane), row1 = weightRow(lane + 8);
    if (row0 >= 0) {
      gemv::PairResidual<T, 1> residual;
      residual.load(a, row0, row1 >= 0 ? row1 : row0, 0);
      storePair<T, T, 1>(a, swiglu, row0, row1 >= 0 ? row1 : row0, 0, acc0, acc1, sq, residual);
    }
  }
  kernels::traceExit(a.trace);
}

int64_t blockBytes(const GemvArgs &a) {
  return a.k * 2 * (a.norm_weight ? 2 : 1) + tileRowVecs(a.k) * 16 * kTileRows;
}

template <typename T> cudaError_t launchTyped(const GemvArgs &a, cudaStream_t stream) {
  auto kernel = stagedGemvKernel<T>;
  const int bytes = static_cast<int>(blockBytes(a));
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      e != cudaSuccess)
    return e;
  const int64_t rows_per_block = a.epilogue == GemvEpilogue::kSwiglu ? kTileRows / 2 : kTileRows;
  const int64_t out_rows = a.epilogue == GemvEpilogue::kSwiglu ? a.n / 2 : a.n;
  dim3 blocks(static_cast<unsigned>((out_rows + rows_per_block - 1) / rows_per_block));
  return kernels::launchKernelWithCarveout(kernel, blocks, dim3(kStagedWarps * 32), static_cast<size_t>(bytes),
                                          stream, a.pdl, 1u, a.carveout_percent, a);
}

} // namespace

bool stagedGemvSupports(const GemvArgs &a, int64_t max_weight_bytes) {
  return gemvSupports(a) && a.m == 1 && a.out_type == a.type && !a.rope_counters && a.k % 256 == 0 &&
         a.n * a.k * 2 <= max_weight_bytes && blockBytes(a) <= kStagedMaxBlockBytes;
}

cudaError_t launchStagedGemv(const GemvArgs &a, cudaStream_t stream) {
  if (!stagedGemvSupports(a, a.n * a.k * 2))
    return cudaErrorInvalidValue;
  return a.type == EType::kBF16 ? launchTyped<__nv_bfloat16>(a, stream) : launchTyped<__half>(a, stream);
}

} // namespace txc::cuda
