//===- Gemv.cu - Bandwidth-bound GEMMs of few rows (decode) ---------------===//
//
// One warp per pair of weight rows (rows j and j + n/2 for SwiGLU, so the
// gate and its up projection meet in one warp; rows 2j and 2j+1 otherwise).
// Each lane streams 16-byte chunks of both rows, kUnroll chunks in flight,
// and multiplies them with every input row (the inputs are small and stay in
// L1/L2). fp32 accumulation, a butterfly reduction that leaves the sums in
// every lane, and lane m stores row m's result, rounded once.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/Gemv.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace txc::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kUnroll = 4;

template <typename T> struct Pack;

// 8 bf16 in a uint4 -> fp32: a bf16 is the top half of its fp32.
template <> struct Pack<__nv_bfloat16> {
  static __device__ __forceinline__ void dot(float &acc, const uint4 &w,
                                             const uint4 &x) {
    const unsigned wv[4] = {w.x, w.y, w.z, w.w}, xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc = fmaf(__uint_as_float(wv[i] << 16), __uint_as_float(xv[i] << 16), acc);
      acc = fmaf(__uint_as_float(wv[i] & 0xffff0000u),
                 __uint_as_float(xv[i] & 0xffff0000u), acc);
    }
  }
  static __device__ __forceinline__ __nv_bfloat16 fromFloat(float v) {
    return __float2bfloat16_rn(v);
  }
  static __device__ __forceinline__ float toFloat(__nv_bfloat16 v) {
    return __bfloat162float(v);
  }
};

template <> struct Pack<__half> {
  static __device__ __forceinline__ void dot(float &acc, const uint4 &w,
                                             const uint4 &x) {
    const unsigned wv[4] = {w.x, w.y, w.z, w.w}, xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 a = __half22float2(*reinterpret_cast<const __half2 *>(&wv[i]));
      float2 b = __half22float2(*reinterpret_cast<const __half2 *>(&xv[i]));
      acc = fmaf(a.x, b.x, acc);
      acc = fmaf(a.y, b.y, acc);
    }
  }
  static __device__ __forceinline__ __half fromFloat(float v) {
    return __float2half_rn(v);
  }
  static __device__ __forceinline__ float toFloat(__half v) {
    return __half2float(v);
  }
};

__device__ __forceinline__ float loadBias(const void *bias, EType type,
                                          int64_t i) {
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

template <typename T, typename OutT, int kMaxRows>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemvKernel(const GemvArgs a) {
  const int lane = threadIdx.x % 32;
  const int64_t pair =
      static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const bool swiglu = a.epilogue == GemvEpilogue::kSwiglu;
  const int64_t pairs = swiglu ? a.n / 2 : (a.n + 1) / 2;
  if (pair >= pairs)
    return;
  const int64_t row0 = swiglu ? pair : 2 * pair;
  const int64_t row1 = swiglu ? pair + a.n / 2 : min(2 * pair + 1, a.n - 1);
  const int64_t vecs = a.k / 8; // 16-byte chunks per row
  const uint4 *w0 = static_cast<const uint4 *>(a.w) + row0 * vecs;
  const uint4 *w1 = static_cast<const uint4 *>(a.w) + row1 * vecs;
  const uint4 *x = static_cast<const uint4 *>(a.x);

  float acc0[kMaxRows], acc1[kMaxRows];
#pragma unroll
  for (int m = 0; m < kMaxRows; ++m)
    acc0[m] = acc1[m] = 0.0f;

  int64_t v = lane;
  for (; v + 32 * (kUnroll - 1) < vecs; v += 32 * kUnroll) {
    uint4 a0[kUnroll], a1[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      // Weights are read once per step: stream them past L1.
      a0[u] = __ldcs(w0 + v + 32 * u);
      a1[u] = __ldcs(w1 + v + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int m = 0; m < kMaxRows; ++m)
        if (m < a.m) {
          uint4 xv = __ldg(x + m * vecs + v + 32 * u);
          Pack<T>::dot(acc0[m], a0[u], xv);
          Pack<T>::dot(acc1[m], a1[u], xv);
        }
  }
  for (; v < vecs; v += 32) {
    uint4 b0 = __ldcs(w0 + v), b1 = __ldcs(w1 + v);
#pragma unroll
    for (int m = 0; m < kMaxRows; ++m)
      if (m < a.m) {
        uint4 xv = __ldg(x + m * vecs + v);
        Pack<T>::dot(acc0[m], b0, xv);
        Pack<T>::dot(acc1[m], b1, xv);
      }
  }
#pragma unroll
  for (int m = 0; m < kMaxRows; ++m)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      acc0[m] += __shfl_xor_sync(0xffffffffu, acc0[m], o);
      acc1[m] += __shfl_xor_sync(0xffffffffu, acc1[m], o);
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

template <typename T, typename OutT>
cudaError_t launchTyped(const GemvArgs &a, cudaStream_t stream) {
  int64_t pairs = a.epilogue == GemvEpilogue::kSwiglu ? a.n / 2 : (a.n + 1) / 2;
  unsigned blocks =
      static_cast<unsigned>((pairs + kWarpsPerBlock - 1) / kWarpsPerBlock);
  dim3 threads(kWarpsPerBlock * 32);
  if (a.m <= 1)
    gemvKernel<T, OutT, 1><<<blocks, threads, 0, stream>>>(a);
  else if (a.m <= 2)
    gemvKernel<T, OutT, 2><<<blocks, threads, 0, stream>>>(a);
  else if (a.m <= 4)
    gemvKernel<T, OutT, 4><<<blocks, threads, 0, stream>>>(a);
  else
    gemvKernel<T, OutT, 8><<<blocks, threads, 0, stream>>>(a);
  return cudaGetLastError();
}

bool aligned16(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

} // namespace

bool gemvSupports(const GemvArgs &a) {
  return (a.type == EType::kBF16 || a.type == EType::kF16) &&
         (a.out_type == a.type || a.out_type == EType::kF32) && a.m >= 1 &&
         a.m <= kGemvMaxRows && a.n >= 1 && a.k >= 8 && a.k % 8 == 0 &&
         aligned16(a.x) && aligned16(a.w) &&
         (a.epilogue != GemvEpilogue::kSwiglu || a.n % 2 == 0) &&
         (a.epilogue != GemvEpilogue::kResidualAdd || a.residual);
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
