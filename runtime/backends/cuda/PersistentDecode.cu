//===- PersistentDecode.cu - A batch-1 decode step in one kernel ----------===//
//
// Blocks of 4 warps, every one resident (persistentDecodeBlocks), walk the
// phase list. Between phases a grid-wide barrier (a self-resetting arrival
// count and a generation word); the first phase waits for the previous
// kernel (PDL) instead.
//
// GEMV phase (m = 1): the row pairs are cut into one contiguous range per
// warp of the grid, and each warp streams its pairs' 16-byte weight chunks
// as one flat sequence, kUnroll chunks in flight, so the loads run on across
// pair boundaries. The first kUnroll loads go out before the barrier. After
// it, the block stages x in shared memory (scaled by the fused norm's
// weight, its squares summed for the inverse RMS, as Gemv.cu rounds it) and
// each finished pair is reduced in its warp and stored by lane 0. With the
// rotary epilogue the warp that finishes a head's last pair runs
// RopeAppend.cuh on it (per-head counters, as in Gemv.cu).
//
// Attention phase: the decode_mma CTAs of the step (split, kv head) spread
// over the blocks; the split combine is the fused one (split counters).
//
// Values written by an earlier phase are read through L2 only (__ldcg,
// cp.async.cg): L1 is not coherent across SMs.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/PersistentDecode.h"

#include "attention/decode_mma.cuh"
#include "runtime/backends/cuda/ElementAccess.cuh"
#include "runtime/backends/cuda/GemvMath.cuh"
#include "runtime/backends/cuda/Launch.cuh"
#include "runtime/backends/cuda/RopeAppend.cuh"

namespace txc::cuda {

namespace {

using T = __nv_bfloat16;
constexpr int kHeadDim = 128;
constexpr int kWarps = 4; // decode_mma's CTA
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 8;
constexpr int kMaxBlocksPerSm = 2;
using Variant = kernels::AttentionVariant<false, false, false>;
template <int kGroup> using Traits = kernels::DecodeMmaTraits<T, kHeadDim, kGroup>;

// Largest K a GEMV phase stages in shared memory (the attention phase's
// pipeline buffer is at least this large).
constexpr int64_t kMaxPhaseK = 32768;
static_assert(Traits<2>::kSmemBytes >= kMaxPhaseK * 2, "x staging must fit the attention buffer");

__device__ __forceinline__ unsigned loadAcquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/// Every block of the grid arrives before any leaves. barrier[0] counts
/// arrivals (the last one resets it), barrier[1] is the generation the
/// waiters watch.
__device__ void gridBarrier(unsigned *barrier) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned generation = loadAcquire(barrier + 1);
    __threadfence(); // this block's writes, before its arrival
    if (atomicAdd(barrier, 1u) == gridDim.x - 1) {
      atomicExch(barrier, 0u);
      __threadfence();
      atomicAdd(barrier + 1, 1u);
    } else {
      while (loadAcquire(barrier + 1) == generation) {
      }
    }
    __threadfence();
  }
  __syncthreads();
}

__device__ __forceinline__ void waitForPrevious(int phase, unsigned *barrier) {
  if (phase == 0)
    pdlWait();
  else
    gridBarrier(barrier);
}

/// Rows of pair `pair`: j and j + n/2 for SwiGLU, else 2j and 2j + 1 (the
/// last row twice when n is odd).
__device__ __forceinline__ void pairRows(const GemvArgs &a, bool swiglu, int64_t pair,
                                         int64_t &row0, int64_t &row1) {
  row0 = swiglu ? pair : 2 * pair;
  row1 = swiglu ? pair + a.n / 2 : min(2 * pair + 1, a.n - 1);
}

/// Lane 0's store of one finished pair (the warp's sums already reduced),
/// then the rotary epilogue if this pair completed its head.
template <typename OutT>
__device__ void finishPair(const GemvArgs &a, bool swiglu, int64_t pair, float acc0, float acc1,
                           float inv_rms, float *staged_head, int lane) {
  int64_t row0, row1;
  pairRows(a, swiglu, pair, row0, row1);
  if (lane == 0) {
    float g = acc0 * inv_rms, u = acc1 * inv_rms;
    if (a.bias) {
      g += ld(a.bias, a.bias_type, row0);
      u += ld(a.bias, a.bias_type, row1);
    }
    if (swiglu) {
      st(a.out, a.out_type, row0, g / (1.0f + expf(-g)) * u);
    } else {
      if (a.epilogue == GemvEpilogue::kResidualAdd) {
        g += ldL2(a.residual, a.out_type, row0);
        u += ldL2(a.residual, a.out_type, row1);
      }
      st(a.out, a.out_type, row0, g);
      if (row1 != row0)
        st(a.out, a.out_type, row1, u);
    }
  }
  if (!a.rope_counters)
    return;
  // Both rows lie in one head (head_dim is even). The warp that stores the
  // head's last pair finishes the head from L2.
  const int64_t d = a.rope.head_dim, head = row0 / d;
  __threadfence();
  bool last = false;
  if (lane == 0) {
    last = atomicAdd(a.rope_counters + head, 1u) == static_cast<unsigned>(d / 2 - 1);
    if (last)
      a.rope_counters[head] = 0;
  }
  if (!__shfl_sync(0xffffffffu, last, 0))
    return;
  __threadfence();
  for (int64_t i = lane; i < d; i += 32)
    staged_head[i] = ldL2(a.out, a.out_type, head * d + i);
  __syncwarp();
  ropeAppendStagedHead(a.rope, 0, head, staged_head, lane);
  __syncwarp();
}

template <typename OutT>
__device__ void gemvPhase(const GemvArgs &a, int phase, unsigned *barrier, unsigned char *smem,
                          float *staged_head) {
  __shared__ float block_squares[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t pairs = swiglu ? a.n / 2 : (a.n + 1) / 2;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t global_warp = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int64_t first_pair = pairs * global_warp / warps;
  const int64_t end_pair = pairs * (global_warp + 1) / warps;
  const int vecs = static_cast<int>(a.k / 8); // 16-byte chunks per row
  const int per_lane = vecs / 32;             // chunks per lane per row
  const int total = static_cast<int>(end_pair - first_pair) * per_lane;
  const uint4 *w = static_cast<const uint4 *>(a.w);

  uint4 w0[kUnroll], w1[kUnroll];
  auto load = [&](int j, int u) {
    if (j < total) {
      int64_t row0, row1;
      pairRows(a, swiglu, first_pair + j / per_lane, row0, row1);
      const int chunk = lane + 32 * (j % per_lane);
      w0[u] = __ldcs(w + row0 * vecs + chunk);
      w1[u] = __ldcs(w + row1 * vecs + chunk);
    }
  };
  // Weights are constant: in flight before the previous phase has finished.
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
    load(u, u);
  waitForPrevious(phase, barrier);

  // x (scaled by the norm weight) into shared memory, once per block.
  uint4 *xs = reinterpret_cast<uint4 *>(smem);
  const uint4 *x = static_cast<const uint4 *>(a.x);
  const uint4 *gamma = static_cast<const uint4 *>(a.norm_weight);
  float squares = 0.0f;
  for (int i = threadIdx.x; i < vecs; i += kThreads) {
    uint4 v = __ldcg(x + i);
    if (gamma)
      scaleAndSquare<T>(v, __ldg(gamma + i), squares);
    xs[i] = v;
  }
  float inv_rms = 1.0f;
  if (gamma) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      squares += __shfl_xor_sync(0xffffffffu, squares, o);
    if (lane == 0)
      block_squares[warp] = squares;
  }
  __syncthreads();
  if (gamma) {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarps; ++i)
      sum += block_squares[i];
    inv_rms = 1.0f / sqrtf(sum / static_cast<float>(a.k) + a.norm_eps);
  }

  float acc0 = 0.0f, acc1 = 0.0f;
  for (int j0 = 0; j0 < total; j0 += kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u;
      if (j >= total)
        break;
      const uint4 xv = xs[lane + 32 * (j % per_lane)];
      Pack<T>::dot(acc0, w0[u], xv);
      Pack<T>::dot(acc1, w1[u], xv);
      load(j + kUnroll, u);
      if (j % per_lane == per_lane - 1) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
          acc0 += __shfl_xor_sync(0xffffffffu, acc0, o);
          acc1 += __shfl_xor_sync(0xffffffffu, acc1, o);
        }
        finishPair<OutT>(a, swiglu, first_pair + j / per_lane, acc0, acc1, inv_rms, staged_head,
                         lane);
        acc0 = acc1 = 0.0f;
      }
    }
  }
}

template <int kGroup>
__device__ void attentionPhase(const kernels::DecodeParams &params, int phase, unsigned *barrier,
                               unsigned char *smem) {
  waitForPrevious(phase, barrier);
  const int splits = params.num_splits, kv_heads = params.num_kv_heads;
  const int ctas = splits * kv_heads * params.batch;
  for (int cta = blockIdx.x; cta < ctas; cta += gridDim.x) {
    kernels::pagedDecodeMmaBlock<Traits<kGroup>, Variant>(params, cta % splits, (cta / splits) % kv_heads,
                                                          cta / (splits * kv_heads), smem);
    __syncthreads(); // its merge buffers, before the next CTA's loads
  }
}

template <int kGroup>
__global__ void __launch_bounds__(kThreads, kMaxBlocksPerSm)
    persistentDecodeKernel(const DecodePhase *phases, const int count, unsigned *barrier) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ float staged_heads[kWarps][kHeadDim];
  float *staged_head = staged_heads[threadIdx.x / 32];
  for (int p = 0; p < count; ++p) {
    const DecodePhase &phase = phases[p];
    if (phase.kind == DecodePhase::Kind::kAttention) {
      const kernels::DecodeParams params = phase.attention;
      attentionPhase<kGroup>(params, p, barrier, smem);
    } else {
      const GemvArgs args = phase.gemv;
      if (args.out_type == EType::kF32)
        gemvPhase<float>(args, p, barrier, smem, staged_head);
      else
        gemvPhase<T>(args, p, barrier, smem, staged_head);
    }
  }
}

template <int kGroup> auto kernelFor() { return persistentDecodeKernel<kGroup>; }

template <typename Fn> cudaError_t withGroup(int group, Fn &&fn) {
  switch (group) {
  case 2:
    return fn(std::integral_constant<int, 2>{});
  case 4:
    return fn(std::integral_constant<int, 4>{});
  case 8:
    return fn(std::integral_constant<int, 8>{});
  default:
    return cudaErrorInvalidValue;
  }
}

bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

} // namespace

bool persistentDecodeSupports(const PersistentDecodeShape &shape) {
  return shape.type == EType::kBF16 && shape.head_dim == kHeadDim &&
         (shape.group == 2 || shape.group == 4 || shape.group == 8);
}

bool persistentGemvSupports(const GemvArgs &a) {
  return gemvSupports(a) && a.m == 1 && a.type == EType::kBF16 &&
         (a.out_type == EType::kBF16 || a.out_type == EType::kF32) && a.k % 256 == 0 &&
         a.k <= kMaxPhaseK && (!a.norm_weight || aligned16(a.norm_weight)) &&
         (!a.rope_counters || a.rope.head_dim <= kHeadDim);
}

bool persistentAttentionSupports(const kernels::DecodeParams &p) {
  return p.batch == 1 && p.num_kv_heads > 0 && p.variant.window_left < 0 &&
         p.variant.softcap <= 0.0f && p.kv.page_table != nullptr &&
         (p.num_splits == 1 ||
          (p.maybe_split_counters && p.num_splits <= kernels::kMaxFusedSplits &&
           p.maybe_partial_o && p.maybe_partial_lse));
}

int persistentDecodeBlocks(const PersistentDecodeShape &shape) {
  int blocks = 0;
  cudaError_t status = withGroup(shape.group, [&](auto g) {
    constexpr int kGroup = decltype(g)::value;
    auto kernel = kernelFor<kGroup>();
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         Traits<kGroup>::kSmemBytes);
    if (e != cudaSuccess)
      return e;
    int per_sm = 0, device = 0, sms = 0;
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads,
                                                      Traits<kGroup>::kSmemBytes);
    if (e == cudaSuccess)
      e = cudaGetDevice(&device);
    if (e == cudaSuccess)
      e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    blocks = sms * std::min(per_sm, kMaxBlocksPerSm);
    return e;
  });
  return status == cudaSuccess ? blocks : 0;
}

cudaError_t launchPersistentDecode(const PersistentDecodeShape &shape, const DecodePhase *phases,
                                   int count, unsigned *barrier, bool pdl, cudaStream_t stream) {
  if (!persistentDecodeSupports(shape) || count <= 0)
    return cudaErrorInvalidValue;
  const int blocks = persistentDecodeBlocks(shape);
  if (blocks <= 0)
    return cudaErrorInvalidConfiguration;
  return withGroup(shape.group, [&](auto g) {
    constexpr int kGroup = decltype(g)::value;
    return launchKernel(kernelFor<kGroup>(), dim3(blocks), dim3(kThreads),
                        Traits<kGroup>::kSmemBytes, stream, pdl, phases, count, barrier);
  });
}

} // namespace txc::cuda
