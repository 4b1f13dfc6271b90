//===- GemvMath.cuh - The GEMVs' dot products and epilogue -----------------===//
//
// Shared by the register-streaming GEMV (Gemv.cu) and the one whose weights
// wait in shared memory (StagedGemv.cu), so both round alike: 16-byte
// chunks of 8 elements dotted in fp32, the fused RMSNorm's squares, and one
// pair's epilogue (norm scale, bias, SwiGLU or residual add, one rounding).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_GEMVMATH_CUH
#define TXC_RUNTIME_BACKENDS_CUDA_GEMVMATH_CUH

#include "runtime/backends/cuda/ElementAccess.cuh"
#include "runtime/backends/cuda/Gemv.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace txc::cuda::gemv {

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

/// The fused RMSNorm whose weight the compiler folded into W: only the
/// squares of x (summed in every GEMV without a norm weight, used only with
/// GemvArgs::norm).
template <typename T> __device__ __forceinline__ void addSquares(const uint4 &x, float &squares) {
  const T *xs = reinterpret_cast<const T *>(&x);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float v = Pack<T>::toFloat(xs[i]);
    squares = fmaf(v, v, squares);
  }
}

/// The residual add's inputs of one pair, token m's in lane m (the lane that
/// stores it), zero without the residual epilogue. The residual does not
/// depend on the dot products, so a GEMV loads it right after its PDL wait:
/// its L2 round trip then overlaps the K loop instead of following the
/// reduction on the last block's path to its exit. In place (out ==
/// residual) is safe: lane m reads only the elements it will write. The
/// elements stay as loaded until the store: converted at the load, the
/// conversion would wait for them there, before the GEMV's input loads.
template <typename OutT, int kMaxRows> struct PairResidual {
  OutT r0[kMaxRows] = {}, r1[kMaxRows] = {};

  __device__ __forceinline__ void load(const GemvArgs &a, int64_t row0, int64_t row1, int lane) {
    if (a.epilogue != GemvEpilogue::kResidualAdd)
      return;
    const OutT *residual = static_cast<const OutT *>(a.residual);
#pragma unroll
    for (int m = 0; m < kMaxRows; ++m) {
      if (m >= a.m || lane != m)
        continue;
      r0[m] = residual[m * a.n + row0];
      if (row1 != row0)
        r1[m] = residual[m * a.n + row1];
    }
  }
};

/// One pair's epilogue: the fused norm's scale, bias, then SwiGLU or the
/// residual add (`residual`, loaded by the caller), and one rounding store;
/// lane m stores token m's values.
template <typename T, typename OutT, int kMaxRows>
__device__ __forceinline__ void
storePair(const GemvArgs &a, bool swiglu, int64_t row0, int64_t row1, int lane,
          float (&acc0)[kMaxRows], float (&acc1)[kMaxRows], const float (&squares)[kMaxRows],
          const PairResidual<OutT, kMaxRows> &residual) {
  if (a.norm)
#pragma unroll
    for (int m = 0; m < kMaxRows; ++m) {
      float inv_rms = 1.0f / sqrtf(squares[m] / static_cast<float>(a.k) + a.norm_eps);
      acc0[m] *= inv_rms;
      acc1[m] *= inv_rms;
    }
  float bias0 = 0.0f, bias1 = 0.0f;
  if (a.bias) {
    bias0 = ld(a.bias, a.bias_type, row0);
    bias1 = ld(a.bias, a.bias_type, row1);
  }
  OutT *out = static_cast<OutT *>(a.out);
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
      g += Store<OutT>::toFloat(residual.r0[m]);
      u += Store<OutT>::toFloat(residual.r1[m]);
    }
    out[m * a.n + row0] = Store<OutT>::fromFloat(g);
    if (second)
      out[m * a.n + row1] = Store<OutT>::fromFloat(u);
  }
}

} // namespace txc::cuda::gemv

#endif
