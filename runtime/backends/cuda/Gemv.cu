//===- Gemv.cu - Bandwidth-bound GEMMs of few rows (decode) ---------------===//
//
// A pair of weight rows (rows j and j + n/2 for SwiGLU, so the gate and its
// up projection meet; rows 2j and 2j+1 otherwise) is split over `slices`
// warps of one block along K (slicesFor). Each lane streams 16-byte chunks
// of both rows, kUnroll chunks in flight, and multiplies them with every
// input row (the inputs are small and stay in L1/L2). fp32 accumulation, a
// butterfly reduction, the slices summed in order through shared memory, and
// lane m stores row m's result, rounded once.
//
// The decode step runs these GEMVs back to back under PDL, so what counts is
// the time after each one's wait: the first weight chunks load before it,
// and after it a pass asks for all its input chunks at once (one row; see
// gemvInputsBatched) and the residual beside them, so the chain after the
// wait is one L2 round trip, the arithmetic and the reduction.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/Gemv.h"
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/GemvMath.cuh"
#include "runtime/backends/cuda/Launch.cuh"
#include "runtime/backends/cuda/RopeAppend.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace txc::cuda {

namespace {

using gemv::addSquares;
using gemv::Pack;
using gemv::scaleAndSquare;
using gemv::storePair;

/// The rotary epilogue: this block wrote rows [first_row, first_row +
/// rows_per_block) of the QKV, all inside one head. The last block of the
/// head to finish (a counter per head) stages the head of every token from
/// L2 and finishes it; it also zeroes the counter for the next launch.
/// Its staging buffer is dynamic shared memory, sized at launch only with
/// the epilogue, so the other GEMVs (every one by default) carry none: a
/// block's shared memory sets the carveout the driver gives the kernel, and
/// the rest of the SM's 256 KB is the L1 that holds the weight loads in
/// flight (device run 61: the GEMVs forced to a 132 KB carveout, 124 KB of
/// L1, made a Llama-3-8B step 5% slower).
template <int kMaxRows>
__device__ void finishHeadIfLast(const GemvArgs &a, int64_t first_row, int64_t rows_per_block) {
  extern __shared__ float staged_rows[]; // [kMaxRows][kGemvMaxRopeHeadDim]
  float(*staged)[kGemvMaxRopeHeadDim] = reinterpret_cast<float(*)[kGemvMaxRopeHeadDim]>(staged_rows);
  __shared__ bool last;
  const int64_t d = a.rope.head_dim;
  const int64_t head = first_row / d;
  // The barrier puts this block's QKV stores before thread 0's
  // acquire-release count, which publishes them (a release is cumulative)
  // and, in the head's last block, makes the others' rows visible to every
  // thread behind the second barrier: no fence a thread (as the decode
  // attention's split merge, device run 173).
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned blocks_per_head = static_cast<unsigned>(d / rows_per_block);
    last = kernels::atomicAddAcqRelGpu(a.rope_counters + head, 1u) == blocks_per_head - 1;
    if (last)
      a.rope_counters[head] = 0;
  }
  __syncthreads();
  if (!last)
    return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= a.m)
    return;
  float *staged_head = staged[warp];
  for (int64_t i = lane; i < d; i += 32)
    staged_head[i] = ldL2(a.out, a.out_type, warp * a.n + head * d + i);
  __syncwarp();
  ropeAppendStagedHead(a.rope, warp, head, staged_head, lane);
}

/// Whether a GEMV asks for all its input chunks of a pass at once: one row
/// and no separate norm weight (GemvArgs::norm_weight, where the compiler
/// did not fold it into W), the decode step's GEMVs. More rows or the norm's
/// weight would take a batch of registers each; ptxas spilled them
/// (100-600 bytes) within the blocks an SM held before.
__host__ __device__ constexpr bool gemvInputsBatched(int rows, bool norm_weight) { return rows == 1 && !norm_weight; }

/// Blocks an SM must hold: as many as each configuration held before the
/// kernel was specialised on the norm's weight and batched its inputs (one
/// row: 56 / 72 / 112 registers for 4 warps at 2 / 4 / 8 chunks, 64 / 78 /
/// 116 for 8 warps; 8 warps at 4 chunks: 80 / 98 at 2 / 4 rows). Left to
/// itself ptxas spent more registers on both (72 -> 80 at 4 warps and 4
/// chunks with the norm's weight, 80 -> 86 at 2 rows), a resident block
/// fewer, and residency is what the GEMV chain's overlap rests on (device
/// runs 183-184).
constexpr int gemvMinBlocksPerSm(int rows, int warps, int unroll) {
  if (rows > 1)
    return rows == 2 ? 3 : 2;
  if (warps == 4)
    return unroll == 2 ? 9 : unroll == 4 ? 7 : 4;
  return unroll == 2 ? 4 : unroll == 4 ? 3 : 2;
}

template <typename T, typename OutT, int kMaxRows, int kWarpsPerBlock, int kUnroll, bool kNormWeight>
__global__ void __launch_bounds__(kWarpsPerBlock * 32,
                                  gemvMinBlocksPerSm(kMaxRows, kWarpsPerBlock, kUnroll))
    gemvKernel(const GemvArgs a, const int slice_shift) {
  __shared__ float partial[kWarpsPerBlock][3][kMaxRows];
  if (!a.late_dependents)
    pdlLaunchDependents();
  kernels::traceEntry(a.trace);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t pairs = swiglu ? a.n / 2 : (a.n + 1) / 2;
  // slices = 1 << slice_shift (slicesFor's powers of two): shifts, not the
  // divisions a run-time count costs, so a block that starts as the kernel
  // before it drains issues its weight loads sooner.
  const int slices = 1 << slice_shift;
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * (kWarpsPerBlock >> slice_shift) + (warp >> slice_shift);
  const int slice = warp & (slices - 1);
  const bool valid = pair < pairs;
  const int64_t row0 = valid ? (swiglu ? pair : 2 * pair) : 0;
  const int64_t row1 = valid ? (swiglu ? pair + a.n / 2 : min(2 * pair + 1, a.n - 1)) : 0;
  // 16-byte chunks per row; positions within a row in 32 bits (gemvSupports:
  // k / 8 fits), which leaves registers for the batched inputs.
  const int vecs = static_cast<int>(a.k / 8);
  // This warp's slice of K: [begin, end) in chunks.
  const int begin = valid ? (vecs * slice) >> slice_shift : 0;
  const int end = valid ? (vecs * (slice + 1)) >> slice_shift : 0;
  const uint4 *w0 = static_cast<const uint4 *>(a.w) + row0 * vecs;
  const uint4 *w1 = static_cast<const uint4 *>(a.w) + row1 * vecs;
  const uint4 *x = static_cast<const uint4 *>(a.x);

  float acc0[kMaxRows], acc1[kMaxRows];
#pragma unroll
  for (int m = 0; m < kMaxRows; ++m)
    acc0[m] = acc1[m] = 0.0f;

  // Weights are constant: the first loads go out before waiting for the
  // previous kernel. They are read once per step, so stream them past L1.
  uint4 a0[kUnroll], a1[kUnroll];
  int v = begin + lane;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
    if (v + 32 * u < end) {
      a0[u] = __ldcs(w0 + v + 32 * u);
      a1[u] = __ldcs(w1 + v + 32 * u);
    }
  pdlWait();
  if (a.late_dependents)
    pdlLaunchDependents();
  kernels::traceWaitRelease(a.trace);
  gemv::PairResidual<OutT, kMaxRows> residual; // read now, added at the store
  if (valid && slice == 0)
    residual.load(a, row0, row1, lane);
  const uint4 *gamma = kNormWeight ? static_cast<const uint4 *>(a.norm_weight) : nullptr;
  // Batched input loads take kUnroll chunks of registers a row, and the
  // norm's weight as many again: one row without it only (gemvInputsBatched).
  constexpr bool kBatchInputs = gemvInputsBatched(kMaxRows, kNormWeight);
  float squares[kMaxRows]; // sum of x^2 over this warp's slice (fused norm)
#pragma unroll
  for (int m = 0; m < kMaxRows; ++m)
    squares[m] = 0.0f;
  for (; v < end; v += 32 * kUnroll) {
    // With kBatchInputs every input chunk of the pass is asked for before
    // any is used: one L2 round trip after the wait. Loaded where used, the
    // compiler issues each chunk's load only after the previous chunk's
    // arithmetic, which waits for its data: kUnroll round trips.
    uint4 batch[kBatchInputs ? kUnroll : 1];
    if constexpr (kBatchInputs) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        batch[u] = v + 32 * u < end ? __ldg(x + v + 32 * u) : uint4{};
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      uint4 g = {};
      if (gamma && v + 32 * u < end)
        g = __ldg(gamma + v + 32 * u);
#pragma unroll
      for (int m = 0; m < kMaxRows; ++m)
        if (m < a.m && v + 32 * u < end) {
          uint4 xv;
          if constexpr (kBatchInputs)
            xv = batch[u];
          else
            xv = __ldg(x + static_cast<int64_t>(m) * vecs + v + 32 * u);
          // Squares even without a norm: a branch on a.norm here cost 6
          // registers (a block an SM fewer), the unused sum only FMAs.
          if (gamma)
            scaleAndSquare<T>(xv, g, squares[m]);
          else
            addSquares<T>(xv, squares[m]);
          Pack<T>::dot(acc0[m], a0[u], xv);
          Pack<T>::dot(acc1[m], a1[u], xv);
        }
    }
    const int next = v + 32 * kUnroll;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (next + 32 * u < end) {
        a0[u] = __ldcs(w0 + next + 32 * u);
        a1[u] = __ldcs(w1 + next + 32 * u);
      }
  }
#pragma unroll
  for (int m = 0; m < kMaxRows; ++m)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      acc0[m] += __shfl_xor_sync(0xffffffffu, acc0[m], o);
      acc1[m] += __shfl_xor_sync(0xffffffffu, acc1[m], o);
      squares[m] += __shfl_xor_sync(0xffffffffu, squares[m], o);
    }
  bool writer = true; // the warp that stores this pair's results
  if (slices > 1) {   // the slices of one pair meet in shared memory
    if (lane == 0)
#pragma unroll
      for (int m = 0; m < kMaxRows; ++m) {
        partial[warp][0][m] = acc0[m];
        partial[warp][1][m] = acc1[m];
        partial[warp][2][m] = squares[m];
      }
    __syncthreads();
    writer = slice == 0;
    if (writer)
#pragma unroll
      for (int m = 0; m < kMaxRows; ++m) {
        acc0[m] = acc1[m] = squares[m] = 0.0f;
        for (int s = 0; s < slices; ++s) { // in slice order: deterministic
          acc0[m] += partial[warp + s][0][m];
          acc1[m] += partial[warp + s][1][m];
          squares[m] += partial[warp + s][2][m];
        }
      }
  }
  if (writer && valid)
    storePair<T, OutT, kMaxRows>(a, swiglu, row0, row1, lane, acc0, acc1, squares, residual);
  if (a.rope_counters) {
    const int64_t pairs_per_block = kWarpsPerBlock >> slice_shift;
    finishHeadIfLast<kMaxRows>(a, 2 * pairs_per_block * blockIdx.x, 2 * pairs_per_block);
  }
  kernels::traceExit(a.trace);
}

/// Warps per weight-row pair: enough warps in flight to cover the GPU's
/// memory latency even when the matrix has few rows (a 1024-row o_proj
/// would otherwise run 512 warps, each walking its rows serially), but at
/// least one 16-byte chunk per lane in every slice.
int slicesFor(int64_t pairs, int64_t k, int warps_per_block, int64_t target_warps) {
  int slices = 1;
  while (slices < warps_per_block && pairs * slices < target_warps && k / 8 / (2 * slices) >= 32)
    slices *= 2;
  return slices;
}

template <typename T, typename OutT, int kMaxRows, int kWarps, int kUnroll>
cudaError_t launchShaped(const GemvArgs &a, const GemvConfig &config, cudaStream_t stream) {
  int64_t pairs = a.epilogue == GemvEpilogue::kSwiglu ? a.n / 2 : (a.n + 1) / 2;
  int slices = slicesFor(pairs, a.k, kWarps, int64_t{smCount()} * config.target_warps_per_sm);
  int64_t pairs_per_block = kWarps / slices;
  const int slice_shift = __builtin_ctz(static_cast<unsigned>(slices));
  dim3 blocks(static_cast<unsigned>((pairs + pairs_per_block - 1) / pairs_per_block));
  dim3 threads(kWarps * 32);
  const size_t rope_staging = a.rope_counters ? sizeof(float) * kMaxRows * kGemvMaxRopeHeadDim : 0;
  auto *kernel = a.norm_weight ? gemvKernel<T, OutT, kMaxRows, kWarps, kUnroll, true>
                               : gemvKernel<T, OutT, kMaxRows, kWarps, kUnroll, false>;
  return kernels::launchKernelWithCarveout(kernel, blocks, threads,
                                          rope_staging, stream, a.pdl, 1u, a.carveout_percent, a, slice_shift);
}

template <typename T, typename OutT, int kWarps>
cudaError_t launchUnrolled(const GemvArgs &a, const GemvConfig &c, cudaStream_t stream) {
  switch (c.unroll) {
  case 2:
    return launchShaped<T, OutT, 1, kWarps, 2>(a, c, stream);
  case 4:
    return launchShaped<T, OutT, 1, kWarps, 4>(a, c, stream);
  case 8:
    return launchShaped<T, OutT, 1, kWarps, 8>(a, c, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

// One row on bf16 takes every configuration the sweep measures; other cases
// keep the configuration they were measured with before it.
template <typename T, typename OutT>
cudaError_t launchTyped(const GemvArgs &a, const GemvConfig &c, cudaStream_t stream) {
  if (a.m <= 1 && std::is_same_v<T, __nv_bfloat16>) {
    if (c.warps_per_block == 4)
      return launchUnrolled<T, OutT, 4>(a, c, stream);
    if (c.warps_per_block == 8)
      return launchUnrolled<T, OutT, 8>(a, c, stream);
    return cudaErrorInvalidValue;
  }
  GemvConfig unswept; // as before the sweep: 8 warps, 4 chunks, 32 warps per SM
  unswept.unroll = 4;
  unswept.target_warps_per_sm = 32;
  if (a.m <= 1)
    return launchShaped<T, OutT, 1, 8, 4>(a, unswept, stream);
  if (a.m <= 2)
    return launchShaped<T, OutT, 2, 8, 4>(a, unswept, stream);
  return launchShaped<T, OutT, 4, 8, 4>(a, unswept, stream);
}

// A block's rows (2 * pairs per block, at most 2 * kWarpsPerBlock = 16)
// must lie in one head: head_dim a multiple of 16 does it.
bool ropeEpilogueSupports(const GemvArgs &a) {
  const RopeAppendArgs &r = a.rope;
  const int64_t heads = r.heads + 2 * r.kv_heads;
  return a.epilogue == GemvEpilogue::kNone && a.out_type == a.type && r.qkv == a.out &&
         r.qkv_type == a.out_type && r.num_tokens == a.m && r.head_dim % 16 == 0 &&
         r.head_dim <= kGemvMaxRopeHeadDim && heads <= kGemvMaxRopeHeads &&
         a.n == heads * r.head_dim && 2 * r.half <= r.head_dim;
}

} // namespace

bool gemvSupports(const GemvArgs &a) {
  return (a.type == EType::kBF16 || a.type == EType::kF16) &&
         (a.out_type == a.type || a.out_type == EType::kF32) && a.m >= 1 && a.m <= kGemvMaxRows &&
         a.n >= 1 && a.k >= 8 && a.k % 8 == 0 && a.k / 8 <= INT32_MAX / 8 && aligned16(a.x) && aligned16(a.w) &&
         (a.epilogue != GemvEpilogue::kSwiglu || a.n % 2 == 0) &&
         (a.epilogue != GemvEpilogue::kResidualAdd || a.residual) &&
         (!a.norm_weight || (a.norm && a.norm_type == a.type && aligned16(a.norm_weight))) &&
         (!a.rope_counters || ropeEpilogueSupports(a));
}

cudaError_t launchGemv(const GemvArgs &a, cudaStream_t stream) {
  return launchGemvWithConfig(a, gemvConfigFor(a.n, a.k), stream);
}

GemvConfig gemvConfigFor(int64_t n, int64_t k) {
  GemvConfig c; // 8 warps, 2 chunks, 16 warps per SM
  if (n >= 65536) {
    c.warps_per_block = 4;
  } else if (n >= 6144) {
    c.warps_per_block = 4;
    c.unroll = 4;
    if (k >= 4096)
      c.target_warps_per_sm = 64;
  } else if (k <= 1024 && n >= 4096) {
    // K unsplit, 4 chunks (Qwen3-0.6B's qkv): half the blocks of the split
    // K leave SMs free as the GEMV before it drains, so the decode
    // attention's 16-warp CTA after it becomes resident ~3.4 us early
    // instead of ~1.2 (its share 7.0 -> 6.4 us a layer), and 4 chunks a
    // lane keep the whole row in flight (the QKV's own time after its wait
    // 2.95 -> 2.62 us). Device runs 115-116: the b1 step 0.666 -> 0.661 ms;
    // unsplit with 2 chunks lost (QKV +2.4 us, run 114), as did 4 chunks
    // with K split (+0.021 ms).
    c.warps_per_block = 4;
    c.unroll = 4;
    c.target_warps_per_sm = 1;
  } else if (k < 4096) {
    // Qwen3-0.6B's o_proj (1024 x 2048) and down (1024 x 3072): 4 K slices
    // of 4 chunks a lane. For o_proj, 4 chunks where session 37 had ranked
    // 2 first on an H100 (runs 213-215: 4 slices of 2 chunks against 2 of 4,
    // -0.021 ms; 4 of 4 not tried): 4 chunks take a b1 step 0.600 -> 0.592
    // ms on an H200 (runs 228-229; 4/4/8 and 4/4/32 launch the same grid)
    // and 0.655 -> 0.645 on an H100 (run 230). Not by deeper prefetch: at
    // k = 2048 a lane's slice is 2 chunks either way, all loaded before the
    // wait; the kernel differs (72 registers against 55, launch bounds of 7
    // blocks an SM against 9), and the attention before it ran ~0.9 us a
    // layer faster (its wait release and its tail; run 230's trace).
    c.warps_per_block = 4;
    c.unroll = 4;
  }
  return c;
}

bool gemvConfigSupported(const GemvConfig &c) {
  return (c.warps_per_block == 4 || c.warps_per_block == 8) &&
         (c.unroll == 2 || c.unroll == 4 || c.unroll == 8) && c.target_warps_per_sm >= 1 &&
         c.target_warps_per_sm <= 1024;
}

cudaError_t launchGemvWithConfig(const GemvArgs &a, const GemvConfig &config, cudaStream_t stream) {
  if (!gemvSupports(a) || !gemvConfigSupported(config))
    return cudaErrorInvalidValue;
  bool f32_out = a.out_type == EType::kF32;
  if (a.type == EType::kBF16)
    return f32_out ? launchTyped<__nv_bfloat16, float>(a, config, stream)
                   : launchTyped<__nv_bfloat16, __nv_bfloat16>(a, config, stream);
  return f32_out ? launchTyped<__half, float>(a, config, stream)
                 : launchTyped<__half, __half>(a, config, stream);
}

} // namespace txc::cuda
