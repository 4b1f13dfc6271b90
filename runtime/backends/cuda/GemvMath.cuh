//===- GemvMath.cuh - 16-byte dot products of the decode GEMVs -----------===//
//
// Eight 16-bit weights against eight 16-bit inputs in fp32, and the fused
// RMSNorm's input scaling; shared by Gemv.cu and PersistentDecode.cu so both
// round the same way.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_GEMVMATH_CUH
#define TXC_RUNTIME_BACKENDS_CUDA_GEMVMATH_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace txc::cuda {

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

} // namespace txc::cuda

#endif
