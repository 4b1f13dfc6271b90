//===- Gemv.cu - Bandwidth-bound GEMMs of few rows (decode) ---------------===//
//
// One block per SM. A warp owns weight-row pairs (rows j and j + n/2 for
// SwiGLU, so the gate and its up projection meet; rows 2j and 2j+1
// otherwise), or a K slice of one pair when there are fewer pairs than
// warps. It streams them through its own ring of kStages shared-memory
// stages with cp.async, each lane copying and later reading only its own
// 16-byte chunks (so no warp or block barrier guards the ring).
//
// Why a ring in shared memory rather than loads into registers: a decode
// step is a chain of small kernels, and a kernel's fixed cost (its ramp
// and its tail) measured 4-6 us per GEMV, more than the weight read of most
// of them. The first kStages stages are issued before the kernel waits for
// its predecessor (PDL), and a block holds few registers and 96 KB of
// shared memory, so it fits on an SM beside the running kernel: the next
// GEMV's weights (all of them for Qwen3-0.6B's matrices) are on chip by the
// time its input is ready.
//
// fp32 accumulation, a butterfly reduction per pair (the K slices summed in
// order through shared memory), and lane m stores row m's result, rounded
// once.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/Gemv.h"
#include "runtime/backends/cuda/Launch.cuh"
#include "runtime/backends/cuda/RopeAppend.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace txc::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kStages = 3;                            // ring stages per warp
constexpr int kStageVecs = 128;                       // 16-byte chunks per row per stage
constexpr int kLaneVecs = kStageVecs / 32;            // per lane per row per stage
constexpr int kWarpRingVecs = kStages * 2 * kStageVecs; // both rows
constexpr size_t kSmemBytes = size_t{kWarpsPerBlock} * kWarpRingVecs * 16; // 96 KB

template <typename T> struct Pack;

// 8 bf16 in a uint4 -> fp32: a bf16 is the top half of its fp32.
template <> struct Pack<__nv_bfloat16> {
  static __device__ __forceinline__ void dot(float &acc, const uint4 &w, const uint4 &x) {
    const unsigned wv[4] = {w.x, w.y, w.z, w.w}, xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc = fmaf(__uint_as_float(wv[i] << 16), __uint_as_float(xv[i] << 16), acc);
      acc = fmaf(__uint_as_float(wv[i] & 0xffff0000u), __uint_as_float(xv[i] & 0xffff0000u), acc);
    }
  }
  static __device__ __forceinline__ __nv_bfloat16 fromFloat(float v) {
    return __float2bfloat16_rn(v);
  }
  static __device__ __forceinline__ float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
};

template <> struct Pack<__half> {
  static __device__ __forceinline__ void dot(float &acc, const uint4 &w, const uint4 &x) {
    const unsigned wv[4] = {w.x, w.y, w.z, w.w}, xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 a = __half22float2(*reinterpret_cast<const __half2 *>(&wv[i]));
      float2 b = __half22float2(*reinterpret_cast<const __half2 *>(&xv[i]));
      acc = fmaf(a.x, b.x, acc);
      acc = fmaf(a.y, b.y, acc);
    }
  }
  static __device__ __forceinline__ __half fromFloat(float v) { return __float2half_rn(v); }
  static __device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
};

__device__ __forceinline__ float loadBias(const void *bias, EType type, int64_t i) {
  switch (type) {
  case EType::kBF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(bias)[i]);
  case EType::kF16:
    return __half2float(static_cast<const __half *>(bias)[i]);
  default:
    return static_cast<const float *>(bias)[i];
  }
}

template <typename T> struct Store {
  static __device__ __forceinline__ T fromFloat(float v) { return Pack<T>::fromFloat(v); }
  static __device__ __forceinline__ float toFloat(T v) { return Pack<T>::toFloat(v); }
};
template <> struct Store<float> {
  static __device__ __forceinline__ float fromFloat(float v) { return v; }
  static __device__ __forceinline__ float toFloat(float v) { return v; }
};

/// The fused RMSNorm: x * w elementwise in fp32 (the norm's weight), with
/// the squares of x summed on the side. The row's inverse RMS is a scalar,
/// so it scales the finished dot product instead of every input element.
template <typename T>
__device__ __forceinline__ void scaleAndSquare(uint4 &x, const uint4 &w, float &squares) {
  T *xs = reinterpret_cast<T *>(&x);
  const T *ws = reinterpret_cast<const T *>(&w);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float v = Pack<T>::toFloat(xs[i]);
    squares = fmaf(v, v, squares);
    xs[i] = Pack<T>::fromFloat(v * Pack<T>::toFloat(ws[i]));
  }
}

/// One pair's epilogue: the fused norm's scale, bias, then SwiGLU or the
/// residual add, and one rounding store; lane m stores token m's values.
template <typename T, typename OutT, int kMaxRows>
__device__ __forceinline__ void storePair(const GemvArgs &a, bool swiglu, int64_t row0,
                                          int64_t row1, int lane, float (&acc0)[kMaxRows],
                                          float (&acc1)[kMaxRows], const float (&squares)[kMaxRows]) {
  if (a.norm_weight)
#pragma unroll
    for (int m = 0; m < kMaxRows; ++m) {
      float inv_rms = 1.0f / sqrtf(squares[m] / static_cast<float>(a.k) + a.norm_eps);
      acc0[m] *= inv_rms;
      acc1[m] *= inv_rms;
    }
  float bias0 = 0.0f, bias1 = 0.0f;
  if (a.bias) {
    bias0 = loadBias(a.bias, a.bias_type, row0);
    bias1 = loadBias(a.bias, a.bias_type, row1);
  }
  OutT *out = static_cast<OutT *>(a.out);
  const OutT *residual = static_cast<const OutT *>(a.residual);
#pragma unroll
  for (int m = 0; m < kMaxRows; ++m) {
    if (m >= a.m || lane != m)
      continue;
    float g = acc0[m] + bias0, u = acc1[m] + bias1;
    if (swiglu) {
      out[m * (a.n / 2) + row0] = Store<OutT>::fromFloat(g / (1.0f + expf(-g)) * u);
      continue;
    }
    bool second = row1 != row0;
    if (a.epilogue == GemvEpilogue::kResidualAdd) {
      g += Store<OutT>::toFloat(residual[m * a.n + row0]);
      if (second)
        u += Store<OutT>::toFloat(residual[m * a.n + row1]);
    }
    out[m * a.n + row0] = Store<OutT>::fromFloat(g);
    if (second)
      out[m * a.n + row1] = Store<OutT>::fromFloat(u);
  }
}

/// The rotary epilogue: this block wrote rows [first_row, first_row +
/// rows_per_block) of the QKV, all inside one head. The last block of the
/// head to finish (a counter per head) stages the head of every token from
/// L2 and finishes it; it also zeroes the counter for the next launch.
template <int kMaxRows>
__device__ void finishHeadIfLast(const GemvArgs &a, int64_t first_row, int64_t rows_per_block) {
  __shared__ float staged[kMaxRows][kGemvMaxRopeHeadDim];
  __shared__ bool last;
  const int64_t d = a.rope.head_dim;
  const int64_t head = first_row / d;
  __threadfence(); // this block's QKV stores, before the count that publishes them
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned blocks_per_head = static_cast<unsigned>(d / rows_per_block);
    last = atomicAdd(a.rope_counters + head, 1u) == blocks_per_head - 1;
    if (last)
      a.rope_counters[head] = 0;
  }
  __syncthreads();
  if (!last)
    return;
  __threadfence();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= a.m)
    return;
  float *staged_head = staged[warp];
  for (int64_t i = lane; i < d; i += 32)
    staged_head[i] = ldL2(a.out, a.out_type, warp * a.n + head * d + i);
  __syncwarp();
  ropeAppendStagedHead(a.rope, warp, head, staged_head, lane);
}

/// How a launch splits the work (planGrid): K slices per pair, pairs per
/// warp, pairs per block.
struct GemvGrid {
  int slices = 1;
  int64_t pairs_per_warp = 1, pairs_per_block = kWarpsPerBlock, blocks = 1;
};

template <typename T, typename OutT, int kMaxRows>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, 2)
    gemvKernel(const GemvArgs a, const GemvGrid grid) {
  extern __shared__ uint4 ring_storage[];
  __shared__ float partial[kWarpsPerBlock][3][kMaxRows];
  pdlLaunchDependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int slices = grid.slices, slice = warp % slices;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t pairs = swiglu ? a.n / 2 : (a.n + 1) / 2;
  const int64_t first_pair =
      blockIdx.x * grid.pairs_per_block + (warp / slices) * grid.pairs_per_warp;
  const int64_t left = pairs - first_pair;
  const int64_t my_pairs = left <= 0 ? 0 : (left < grid.pairs_per_warp ? left : grid.pairs_per_warp);
  const int64_t vecs = a.k / 8; // 16-byte chunks per row
  // This warp's slice of K, [k_begin, k_end) in chunks, in stages of kStageVecs.
  const int64_t k_begin = vecs * slice / slices, k_end = vecs * (slice + 1) / slices;
  const int64_t stages_per_pair = (k_end - k_begin + kStageVecs - 1) / kStageVecs;
  const int64_t stages = my_pairs * stages_per_pair;
  uint4 *ring = ring_storage + warp * kWarpRingVecs;
  const uint4 *w = static_cast<const uint4 *>(a.w);
  auto rowsOf = [&](int64_t pair, int64_t &row0, int64_t &row1) {
    row0 = swiglu ? pair : 2 * pair;
    row1 = swiglu ? pair + a.n / 2 : min(2 * pair + 1, a.n - 1);
  };
  // Stage s of this warp into ring slot s % kStages; always one commit
  // group per stage (empty past the end) so wait_group counts stages.
  auto issue = [&](int64_t s) {
    if (s < stages) {
      int64_t row0, row1;
      rowsOf(first_pair + s / stages_per_pair, row0, row1);
      const int64_t v0 = k_begin + (s % stages_per_pair) * kStageVecs;
      uint4 *slot = ring + (s % kStages) * 2 * kStageVecs;
#pragma unroll
      for (int j = 0; j < kLaneVecs; ++j) {
        const int64_t v = v0 + lane + 32 * j;
        if (v < k_end) {
          kernels::cpAsync16(slot + lane + 32 * j, w + row0 * vecs + v);
          kernels::cpAsync16(slot + kStageVecs + lane + 32 * j, w + row1 * vecs + v);
        }
      }
    }
    kernels::cpAsyncCommit();
  };
  // Weights are constant: the ring fills before waiting for the previous
  // kernel, whose result (x) is read only after the wait.
#pragma unroll
  for (int s = 0; s < kStages; ++s)
    issue(s);
  pdlWait();

  const uint4 *x = static_cast<const uint4 *>(a.x);
  const uint4 *gamma = static_cast<const uint4 *>(a.norm_weight);
  float acc0[kMaxRows], acc1[kMaxRows], squares[kMaxRows]; // squares: the fused norm
#pragma unroll
  for (int m = 0; m < kMaxRows; ++m)
    acc0[m] = acc1[m] = squares[m] = 0.0f;
  for (int64_t s = 0; s < stages; ++s) {
    kernels::cpAsyncWait<kStages - 1>(); // this lane's copies of stage s have landed
    const int64_t stage_in_pair = s % stages_per_pair;
    const int64_t v0 = k_begin + stage_in_pair * kStageVecs;
    const uint4 *slot = ring + (s % kStages) * 2 * kStageVecs;
#pragma unroll
    for (int j = 0; j < kLaneVecs; ++j) {
      const int64_t v = v0 + lane + 32 * j;
      if (v >= k_end)
        continue;
      const uint4 w0 = slot[lane + 32 * j], w1 = slot[kStageVecs + lane + 32 * j];
      uint4 g = {};
      if (gamma)
        g = __ldg(gamma + v);
#pragma unroll
      for (int m = 0; m < kMaxRows; ++m)
        if (m < a.m) {
          uint4 xv = __ldg(x + m * vecs + v);
          if (gamma)
            scaleAndSquare<T>(xv, g, squares[m]);
          Pack<T>::dot(acc0[m], w0, xv);
          Pack<T>::dot(acc1[m], w1, xv);
        }
    }
    issue(s + kStages); // into the slot just read (this lane's own chunks)
    if (stage_in_pair != stages_per_pair - 1)
      continue;
    // The pair's last stage: reduce over the lanes.
#pragma unroll
    for (int m = 0; m < kMaxRows; ++m)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        acc0[m] += __shfl_xor_sync(0xffffffffu, acc0[m], o);
        acc1[m] += __shfl_xor_sync(0xffffffffu, acc1[m], o);
        squares[m] += __shfl_xor_sync(0xffffffffu, squares[m], o);
      }
    if (slices > 1)
      break; // one pair per warp: the slices meet below
    int64_t row0, row1;
    rowsOf(first_pair + s / stages_per_pair, row0, row1);
    storePair<T, OutT, kMaxRows>(a, swiglu, row0, row1, lane, acc0, acc1, squares);
#pragma unroll
    for (int m = 0; m < kMaxRows; ++m)
      acc0[m] = acc1[m] = squares[m] = 0.0f;
  }
  kernels::cpAsyncWait<0>();
  if (slices > 1) { // the slices of one pair meet in shared memory
    if (lane == 0)
#pragma unroll
      for (int m = 0; m < kMaxRows; ++m) {
        partial[warp][0][m] = acc0[m];
        partial[warp][1][m] = acc1[m];
        partial[warp][2][m] = squares[m];
      }
    __syncthreads();
    if (slice == 0 && my_pairs > 0) {
#pragma unroll
      for (int m = 0; m < kMaxRows; ++m) {
        acc0[m] = acc1[m] = squares[m] = 0.0f;
        for (int s = 0; s < slices; ++s) { // in slice order: deterministic
          acc0[m] += partial[warp + s][0][m];
          acc1[m] += partial[warp + s][1][m];
          squares[m] += partial[warp + s][2][m];
        }
      }
      int64_t row0, row1;
      rowsOf(first_pair, row0, row1);
      storePair<T, OutT, kMaxRows>(a, swiglu, row0, row1, lane, acc0, acc1, squares);
    }
  }
  if (a.rope_counters)
    finishHeadIfLast<kMaxRows>(a, 2 * grid.pairs_per_block * blockIdx.x,
                               2 * grid.pairs_per_block);
}

int multiprocessors() {
  static const int count = [] {
    int device = 0, sms = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    return sms > 0 ? sms : 132;
  }();
  return count;
}

/// One block per SM. Many pairs: whole pairs per warp. Fewer pairs than
/// warps: K split over up to kWarpsPerBlock warps per pair (at least one
/// chunk per lane each), so every SM still streams. With the rotary
/// epilogue a block's pairs must divide a head's (finishHeadIfLast).
GemvGrid planGrid(const GemvArgs &a) {
  const int64_t pairs = a.epilogue == GemvEpilogue::kSwiglu ? a.n / 2 : (a.n + 1) / 2;
  const int64_t warps = int64_t{multiprocessors()} * kWarpsPerBlock;
  GemvGrid g;
  if (pairs >= warps) {
    g.pairs_per_warp = (pairs + warps - 1) / warps;
  } else {
    while (g.slices < kWarpsPerBlock && pairs * g.slices * 2 <= warps &&
           a.k / 8 / (2 * g.slices) >= 32)
      g.slices *= 2;
  }
  const int64_t groups = kWarpsPerBlock / g.slices;
  if (a.rope_counters) {
    const int64_t head_pairs = a.rope.head_dim / 2; // a multiple of 8 (ropeEpilogueSupports)
    while (g.pairs_per_warp > 1 && head_pairs % (groups * g.pairs_per_warp) != 0)
      --g.pairs_per_warp;
  }
  g.pairs_per_block = groups * g.pairs_per_warp;
  g.blocks = (pairs + g.pairs_per_block - 1) / g.pairs_per_block;
  return g;
}

template <typename T, typename OutT, int kMaxRows>
cudaError_t launchRows(const GemvArgs &a, const GemvGrid &grid, cudaStream_t stream) {
  auto kernel = gemvKernel<T, OutT, kMaxRows>;
  static const cudaError_t smem_set = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes));
  if (smem_set != cudaSuccess)
    return smem_set;
  return launchKernel(kernel, dim3(static_cast<unsigned>(grid.blocks)),
                      dim3(kWarpsPerBlock * 32), kSmemBytes, stream, a.pdl, a, grid);
}

template <typename T, typename OutT>
cudaError_t launchTyped(const GemvArgs &a, cudaStream_t stream) {
  const GemvGrid grid = planGrid(a);
  if (a.m <= 1)
    return launchRows<T, OutT, 1>(a, grid, stream);
  if (a.m <= 2)
    return launchRows<T, OutT, 2>(a, grid, stream);
  return launchRows<T, OutT, 4>(a, grid, stream);
}

bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// A block's rows must lie in one head (planGrid keeps its pairs a divisor
// of a head's; at least kWarpsPerBlock pairs, so head_dim % 16 == 0).
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
         a.n >= 1 && a.k >= 8 && a.k % 8 == 0 && aligned16(a.x) && aligned16(a.w) &&
         (a.epilogue != GemvEpilogue::kSwiglu || a.n % 2 == 0) &&
         (a.epilogue != GemvEpilogue::kResidualAdd || a.residual) &&
         (!a.norm_weight || (a.norm_type == a.type && aligned16(a.norm_weight))) &&
         (!a.rope_counters || ropeEpilogueSupports(a));
}

cudaError_t launchGemv(const GemvArgs &a, cudaStream_t stream) {
  if (!gemvSupports(a))
    return cudaErrorInvalidValue;
  bool f32_out = a.out_type == EType::kF32;
  if (a.type == EType::kBF16)
    return f32_out ? launchTyped<__nv_bfloat16, float>(a, stream)
                   : launchTyped<__nv_bfloat16, __nv_bfloat16>(a, stream);
  return f32_out ? launchTyped<__half, float>(a, stream) : launchTyped<__half, __half>(a, stream);
}

} // namespace txc::cuda
