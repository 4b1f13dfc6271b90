//===- StagedGemv.cu - One-row GEMVs whose weights wait in shared memory --===//
//
// A warp owns kPairsPerWarp pairs of weight rows, paired as Gemv.cu pairs
// them (rows 2j and 2j+1; the gate row j and its up row j + n/2 for SwiGLU),
// and copies them whole into its part of the block's shared memory with
// cp.async before the wait (W is constant). After the wait the block copies
// the input row (and the norm weight) in one more group, so every load of
// the input is one L2 round trip whatever k; then each lane dots 16-byte
// chunks lane, lane + 32, ... of its rows with the input, fp32 sums meet
// by butterfly, and lane p stores pair p through GemvMath's epilogue.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/StagedGemv.h"
#include "runtime/backends/cuda/GemvMath.cuh"
#include "runtime/backends/cuda/Launch.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace txc::cuda {

namespace {

using gemv::addSquares;
using gemv::Pack;
using gemv::scaleAndSquare;
using gemv::storePair;

constexpr int kStagedWarps = 4;
// A block's shared memory at most: the rows of one warp stay a few KB at
// the sizes it is meant for, and blocks small against the SM's 227 KB let
// the next GEMV's blocks in beside this one's.
constexpr int64_t kStagedMaxBlockBytes = 96 * 1024;
// Two pairs a warp where that still gives about 1.5 blocks an SM (132 SMs),
// one otherwise: more, smaller blocks spread a GEMV over more SMs.
constexpr int64_t kTwoPairsMinBlocks = 192;

__device__ __forceinline__ void pairRows(const GemvArgs &a, bool swiglu, int64_t pair, int64_t &row0,
                                         int64_t &row1) {
  row0 = swiglu ? pair : 2 * pair;
  row1 = swiglu ? pair + a.n / 2 : min(2 * pair + 1, a.n - 1);
}

/// Dynamic shared memory: the input row [k / 8 chunks], the norm weight
/// (with one), then warp w's rows, pair p's two rows at [w][p][2][k / 8].
template <typename T, int kPairsPerWarp>
__global__ void __launch_bounds__(kStagedWarps * 32) stagedGemvKernel(const GemvArgs a) {
  extern __shared__ __align__(16) uint4 staged[];
  if (!a.late_dependents)
    pdlLaunchDependents();
  kernels::traceEntry(a.trace);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t pairs = swiglu ? a.n / 2 : (a.n + 1) / 2;
  const int64_t first_pair = (static_cast<int64_t>(blockIdx.x) * kStagedWarps + warp) * kPairsPerWarp;
  const int64_t vecs = a.k / 8;
  const uint4 *gamma = static_cast<const uint4 *>(a.norm_weight);
  uint4 *x_staged = staged;
  uint4 *gamma_staged = staged + vecs;
  uint4 *rows_staged = staged + (gamma ? 2 : 1) * vecs + static_cast<int64_t>(warp) * kPairsPerWarp * 2 * vecs;

  // Weights are read once a step: evict them first from L2, ahead of the
  // KV cache and the activations.
  const unsigned long long evict_first = kernels::l2EvictFirstPolicy();
  const uint4 *w = static_cast<const uint4 *>(a.w);
#pragma unroll
  for (int p = 0; p < kPairsPerWarp; ++p) {
    const int64_t pair = first_pair + p;
    if (pair >= pairs)
      break;
    int64_t rows[2];
    pairRows(a, swiglu, pair, rows[0], rows[1]);
#pragma unroll
    for (int r = 0; r < 2; ++r)
      for (int64_t v = lane; v < vecs; v += 32)
        kernels::cpAsync16(rows_staged + (2 * p + r) * vecs + v, w + rows[r] * vecs + v, true, evict_first);
  }
  if (gamma)
    for (int64_t v = threadIdx.x; v < vecs; v += kStagedWarps * 32)
      kernels::cpAsync16(gamma_staged + v, gamma + v);
  kernels::cpAsyncCommit();

  pdlWait();
  if (a.late_dependents)
    pdlLaunchDependents();
  kernels::traceWaitRelease(a.trace);
  const uint4 *x = static_cast<const uint4 *>(a.x);
  for (int64_t v = threadIdx.x; v < vecs; v += kStagedWarps * 32)
    kernels::cpAsync16(x_staged + v, x + v);
  kernels::cpAsyncCommit();
  kernels::cpAsyncWait<0>();
  __syncthreads();

  float acc[kPairsPerWarp][2];
#pragma unroll
  for (int p = 0; p < kPairsPerWarp; ++p)
    acc[p][0] = acc[p][1] = 0.0f;
  float squares = 0.0f;
#pragma unroll 4
  for (int64_t v = lane; v < vecs; v += 32) {
    uint4 xv = x_staged[v];
    if (a.norm) {
      if (gamma)
        scaleAndSquare<T>(xv, gamma_staged[v], squares);
      else
        addSquares<T>(xv, squares);
    }
#pragma unroll
    for (int p = 0; p < kPairsPerWarp; ++p) {
      Pack<T>::dot(acc[p][0], rows_staged[(2 * p) * vecs + v], xv);
      Pack<T>::dot(acc[p][1], rows_staged[(2 * p + 1) * vecs + v], xv);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
    for (int p = 0; p < kPairsPerWarp; ++p) {
      acc[p][0] += __shfl_xor_sync(0xffffffffu, acc[p][0], o);
      acc[p][1] += __shfl_xor_sync(0xffffffffu, acc[p][1], o);
    }
    squares += __shfl_xor_sync(0xffffffffu, squares, o);
  }
#pragma unroll
  for (int p = 0; p < kPairsPerWarp; ++p) {
    const int64_t pair = first_pair + p;
    if (pair >= pairs)
      break;
    int64_t row0, row1;
    pairRows(a, swiglu, pair, row0, row1);
    float acc0[1] = {acc[p][0]}, acc1[1] = {acc[p][1]};
    const float sq[1] = {squares};
    // storePair stores where its lane argument is 0: lane p stores pair p.
    storePair<T, T, 1>(a, swiglu, row0, row1, lane - p, acc0, acc1, sq);
  }
  kernels::traceExit(a.trace);
}

int pairsPerWarpFor(const GemvArgs &a) {
  const int64_t pairs = a.epilogue == GemvEpilogue::kSwiglu ? a.n / 2 : (a.n + 1) / 2;
  return (pairs + 2 * kStagedWarps - 1) / (2 * kStagedWarps) >= kTwoPairsMinBlocks ? 2 : 1;
}

int64_t blockBytes(const GemvArgs &a, int pairs_per_warp) {
  const int64_t row_bytes = a.k * 2;
  return row_bytes * ((a.norm_weight ? 2 : 1) + 2 * kStagedWarps * pairs_per_warp);
}

template <typename T, int kPairsPerWarp>
cudaError_t launchShaped(const GemvArgs &a, cudaStream_t stream) {
  auto kernel = stagedGemvKernel<T, kPairsPerWarp>;
  const int bytes = static_cast<int>(blockBytes(a, kPairsPerWarp));
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      e != cudaSuccess)
    return e;
  const int64_t pairs = a.epilogue == GemvEpilogue::kSwiglu ? a.n / 2 : (a.n + 1) / 2;
  const int64_t pairs_per_block = int64_t{kStagedWarps} * kPairsPerWarp;
  dim3 blocks(static_cast<unsigned>((pairs + pairs_per_block - 1) / pairs_per_block));
  // All of the SM's unified memory as shared memory: the weights arrive
  // through cp.async, not L1, and the blocks of two or three GEMVs wait
  // side by side.
  const int carveout = a.carveout_percent >= 0 ? a.carveout_percent : 100;
  return kernels::launchKernelWithCarveout(kernel, blocks, dim3(kStagedWarps * 32),
                                          static_cast<size_t>(bytes), stream, a.pdl,
                                          1u, carveout, a);
}

template <typename T> cudaError_t launchTyped(const GemvArgs &a, cudaStream_t stream) {
  return pairsPerWarpFor(a) == 2 ? launchShaped<T, 2>(a, stream) : launchShaped<T, 1>(a, stream);
}

} // namespace

bool stagedGemvSupports(const GemvArgs &a, int64_t max_weight_bytes) {
  return gemvSupports(a) && a.m == 1 && a.out_type == a.type && !a.rope_counters && a.k % 256 == 0 &&
         a.n * a.k * 2 <= max_weight_bytes && blockBytes(a, pairsPerWarpFor(a)) <= kStagedMaxBlockBytes;
}

cudaError_t launchStagedGemv(const GemvArgs &a, cudaStream_t stream) {
  if (!stagedGemvSupports(a, a.n * a.k * 2))
    return cudaErrorInvalidValue;
  return a.type == EType::kBF16 ? launchTyped<__nv_bfloat16>(a, stream) : launchTyped<__half>(a, stream);
}

} // namespace txc::cuda
