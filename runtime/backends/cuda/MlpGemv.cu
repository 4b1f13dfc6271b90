//===- MlpGemv.cu - The MLP's two one-row GEMVs in one kernel -------------===//
//
// Phase 1 (gate/up, SwiGLU) and phase 2 (down, residual add) are Gemv.cu's
// walk over weight-row pairs, a block a unit of kMlpWarps / slices pairs,
// with a grid barrier between them. Phase 2 reads
// phase 1's results through the L2 (ld.global.cg): they were written in
// this kernel, where the read-only path may hold stale lines.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/MlpGemv.h"
#include "runtime/backends/cuda/GemvMath.cuh"
#include "runtime/backends/cuda/Launch.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace txc::cuda {

namespace {

using gemv::addSquares;
using gemv::Pack;
using gemv::scaleAndSquare;
using gemv::storePair;

constexpr int kMlpWarps = 4;
constexpr int kMlpUnroll = 4;

/// Bounded spin at the grid barrier: ~1 s on the global timer.
constexpr unsigned long long kBarrierTimeoutNs = 1'000'000'000ull;

__device__ __forceinline__ unsigned long long loadAcquire(const unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned long long addAcqRel(unsigned long long *p) {
  unsigned long long before;
  asm volatile("atom.add.acq_rel.gpu.global.u64 %0, [%1], 1;" : "=l"(before) : "l"(p) : "memory");
  return before;
}

__device__ __forceinline__ void storeRelease(unsigned long long *p, unsigned long long v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/// Every block of the grid arrives before any leaves, and what each wrote
/// before it is visible to all after it. A flat count lost (device run 125:
/// 768 arrivals on one word serialise at its L2 slice while every block
/// polls it), so it is a two-level tree: block b's thread 0 arrives at group
/// b % G's count; each group's last arrival arrives at the top count; the
/// grid's last releases a flag in each group, which the group's blocks poll
/// (acquire loads, 48 a line at 768 blocks). Release/acquire pairs chain
/// every block's stores (ordered by its barrier before its arrival) to
/// every block after the flag. Counts only grow: a count's arrivals tell
/// which launch this is (launch = count / arrivals a launch), and the flag
/// holds the last launch done.
__device__ void gridBarrier(const MlpGridBarrier &b) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned groups = min(static_cast<unsigned>(kMlpBarrierGroups), gridDim.x);
    const unsigned group = blockIdx.x % groups;
    const unsigned long long members = (gridDim.x - group + groups - 1) / groups;
    unsigned long long *const count = b.words + group * kMlpBarrierWordStride;
    unsigned long long *const top = b.words + kMlpBarrierGroups * kMlpBarrierWordStride;
    unsigned long long *const flags = top + kMlpBarrierWordStride;
    const unsigned long long arrived = addAcqRel(count);
    const unsigned long long launch = arrived / members;
    if ((arrived + 1) % members == 0 && (addAcqRel(top) + 1) % groups == 0)
      for (unsigned g = 0; g < groups; ++g)
        storeRelease(flags + g * kMlpBarrierWordStride, launch + 1);
    const unsigned long long start = kernels::globalTimerNs();
    while (loadAcquire(flags + group * kMlpBarrierWordStride) < launch + 1)
      if (kernels::globalTimerNs() - start > kBarrierTimeoutNs)
        __trap(); // not all blocks resident: fail the launch, do not hang
  }
  __syncthreads();
}

/// One GEMV over a's pairs as gemvKernel<T, T, 1, kMlpWarps, kMlpUnroll>
/// walks them with `slices` warps a pair: block b takes unit b, pairs
/// [b, b + 1) * kMlpWarps / slices (the grid covers every unit). The
/// first weight chunks are loaded before `wait()` (PDL's wait, or the grid
/// barrier), which every thread of the block calls; x only after it.
/// kCoherentX: x was written in this kernel (read through the L2).
template <typename T, bool kCoherentX, typename Wait>
__device__ __forceinline__ void gemvPhase(const GemvArgs &a, const int slices, float (&partial)[kMlpWarps][3],
                                          Wait wait) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t pairs = swiglu ? a.n / 2 : (a.n + 1) / 2;
  const int pairs_per_block = kMlpWarps / slices;
  const int slice = warp % slices;
  const int64_t vecs = a.k / 8; // 16-byte chunks per row
  const uint4 *x = static_cast<const uint4 *>(a.x);
  const uint4 *gamma = static_cast<const uint4 *>(a.norm_weight);
  {
    const int64_t pair = static_cast<int64_t>(blockIdx.x) * pairs_per_block + warp / slices;
    const bool valid = pair < pairs;
    const int64_t row0 = valid ? (swiglu ? pair : 2 * pair) : 0;
    const int64_t row1 = valid ? (swiglu ? pair + a.n / 2 : min(2 * pair + 1, a.n - 1)) : 0;
    const int64_t begin = valid ? vecs * slice / slices : 0;
    const int64_t end = valid ? vecs * (slice + 1) / slices : 0;
    const uint4 *w0 = static_cast<const uint4 *>(a.w) + row0 * vecs;
    const uint4 *w1 = static_cast<const uint4 *>(a.w) + row1 * vecs;
    float acc0[1] = {0.0f}, acc1[1] = {0.0f}, squares[1] = {0.0f};
    uint4 a0[kMlpUnroll], a1[kMlpUnroll];
    int64_t v = begin + lane;
#pragma unroll
    for (int u = 0; u < kMlpUnroll; ++u)
      if (v + 32 * u < end) {
        a0[u] = __ldcs(w0 + v + 32 * u);
        a1[u] = __ldcs(w1 + v + 32 * u);
      }
    wait();
    for (; v < end; v += 32 * kMlpUnroll) {
#pragma unroll
      for (int u = 0; u < kMlpUnroll; ++u) {
        uint4 g = {};
        if (gamma && v + 32 * u < end)
          g = __ldg(gamma + v + 32 * u);
        if (v + 32 * u < end) {
          uint4 xv = kCoherentX ? __ldcg(x + v + 32 * u) : __ldg(x + v + 32 * u);
          if (gamma)
            scaleAndSquare<T>(xv, g, squares[0]);
          else
            addSquares<T>(xv, squares[0]);
          Pack<T>::dot(acc0[0], a0[u], xv);
          Pack<T>::dot(acc1[0], a1[u], xv);
        }
      }
      const int64_t next = v + 32 * kMlpUnroll;
#pragma unroll
      for (int u = 0; u < kMlpUnroll; ++u)
        if (next + 32 * u < end) {
          a0[u] = __ldcs(w0 + next + 32 * u);
          a1[u] = __ldcs(w1 + next + 32 * u);
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      acc0[0] += __shfl_xor_sync(0xffffffffu, acc0[0], o);
      acc1[0] += __shfl_xor_sync(0xffffffffu, acc1[0], o);
      squares[0] += __shfl_xor_sync(0xffffffffu, squares[0], o);
    }
    bool writer = true;
    if (slices > 1) { // the slices of one pair meet in shared memory, in order
      if (lane == 0) {
        partial[warp][0] = acc0[0];
        partial[warp][1] = acc1[0];
        partial[warp][2] = squares[0];
      }
      __syncthreads();
      writer = slice == 0;
      if (writer) {
        acc0[0] = acc1[0] = squares[0] = 0.0f;
        for (int s = 0; s < slices; ++s) {
          acc0[0] += partial[warp + s][0];
          acc1[0] += partial[warp + s][1];
          squares[0] += partial[warp + s][2];
        }
      }
    }
    if (writer && valid)
      storePair<T, T, 1>(a, swiglu, row0, row1, lane, acc0, acc1, squares);
  }
}

template <typename T>
__global__ void __launch_bounds__(kMlpWarps * 32)
    mlpGemvKernel(const MlpGemvArgs args, const int gate_up_slices, const int down_slices) {
  __shared__ float partial[kMlpWarps][3];
  // Safe at the start: the next kernel launches once every block here has
  // run this, so all of them are resident before any of its blocks is.
  if (!args.late_dependents)
    pdlLaunchDependents();
  kernels::traceEntry(args.trace);
  gemvPhase<T, false>(args.gate_up, gate_up_slices, partial, [&] {
    pdlWait();
    kernels::traceWaitRelease(args.trace);
  });
  // Down's first chunks go out before the barrier, as weights before a wait.
  gemvPhase<T, true>(args.down, down_slices, partial, [&] {
    gridBarrier(args.barrier);
    if (args.late_dependents)
      pdlLaunchDependents();
  });
  kernels::traceExit(args.trace);
}

/// Gemv.cu's configuration for a's shape (launchGemv's choice): its slices,
/// and whether its blocks have kMlpWarps warps. Its chunks in flight do not
/// matter: a lane takes its chunks in the same order however many are.
bool inFusedConfiguration(const GemvArgs &a, int *slices) {
  const GemvConfig c = gemvConfigFor(a.n, a.k);
  *slices = gemvSlicesFor(a, c);
  return c.warps_per_block == kMlpWarps;
}

int64_t unitsOf(const GemvArgs &a, int slices) {
  const int64_t pairs = a.epilogue == GemvEpilogue::kSwiglu ? a.n / 2 : (a.n + 1) / 2;
  const int64_t per_block = kMlpWarps / slices;
  return (pairs + per_block - 1) / per_block;
}

/// Blocks of mlpGemvKernel<T> the GPU holds at once (0 on an error).
template <typename T> int64_t residentBlocks() {
  static int64_t resident = -1;
  if (resident < 0) {
    int device = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mlpGemvKernel<T>, kMlpWarps * 32, 0) !=
            cudaSuccess)
      return 0;
    resident = static_cast<int64_t>(per_sm) * sms;
  }
  return resident;
}

/// A block a unit of each phase: the grid, if the GPU holds it at once.
int64_t fusedGrid(const MlpGemvArgs &args, int gate_up_slices, int down_slices) {
  const int64_t blocks = std::max(unitsOf(args.gate_up, gate_up_slices), unitsOf(args.down, down_slices));
  const int64_t resident =
      args.gate_up.type == EType::kBF16 ? residentBlocks<__nv_bfloat16>() : residentBlocks<__half>();
  return blocks <= resident ? blocks : 0;
}

} // namespace

bool mlpGemvSupports(const MlpGemvArgs &args) {
  const GemvArgs &g = args.gate_up, &d = args.down;
  int gate_up_slices = 0, down_slices = 0;
  return gemvSupports(g) && gemvSupports(d) && g.m == 1 && d.m == 1 && g.type == d.type &&
         g.out_type == g.type && d.out_type == d.type && g.epilogue == GemvEpilogue::kSwiglu &&
         d.epilogue == GemvEpilogue::kResidualAdd && !d.norm && !g.rope_counters &&
         !d.rope_counters && !g.kv_prefetch.pages && !d.kv_prefetch.pages && g.out == d.x &&
         d.k == g.n / 2 && inFusedConfiguration(g, &gate_up_slices) && inFusedConfiguration(d, &down_slices) &&
         args.barrier.words && fusedGrid(args, gate_up_slices, down_slices) > 0;
}

cudaError_t launchMlpGemv(const MlpGemvArgs &args, cudaStream_t stream) {
  if (!mlpGemvSupports(args))
    return cudaErrorInvalidValue;
  int gate_up_slices = 0, down_slices = 0;
  inFusedConfiguration(args.gate_up, &gate_up_slices);
  inFusedConfiguration(args.down, &down_slices);
  const dim3 grid(static_cast<unsigned>(fusedGrid(args, gate_up_slices, down_slices)));
  if (args.gate_up.type == EType::kBF16)
    return kernels::launchKernel(mlpGemvKernel<__nv_bfloat16>, grid, dim3(kMlpWarps * 32), 0, stream, args.pdl,
                                 args, gate_up_slices, down_slices);
  return kernels::launchKernel(mlpGemvKernel<__half>, grid, dim3(kMlpWarps * 32), 0, stream, args.pdl, args,
                               gate_up_slices, down_slices);
}

} // namespace txc::cuda
