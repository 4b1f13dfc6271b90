//===- ElementAccess.cuh - Loads and stores of any element type ----------===//
//
// The backend's small kernels take their element types at run time (EType);
// these read and write one element as fp32. Shared by CudaKernels.cu and the
// GEMV's rotary epilogue.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_ELEMENTACCESS_CUH
#define TXC_RUNTIME_BACKENDS_CUDA_ELEMENTACCESS_CUH

#include "runtime/backends/cuda/CudaKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace txc::cuda {

__device__ __forceinline__ float ld(const void *base, EType t, int64_t i) {
  switch (t) {
  case EType::kBF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(base)[i]);
  case EType::kF16:
    return __half2float(static_cast<const __half *>(base)[i]);
  default:
    return static_cast<const float *>(base)[i];
  }
}

/// f(a value of the type `t` stores, 0): a caller that loads several values
/// loads them as stored and converts after, where ld() converts each as it
/// loads and so makes the loads wait for each other.
template <typename F> __device__ __forceinline__ void withStoredType(EType t, F &&f) {
  if (t == EType::kBF16)
    f(__nv_bfloat16(0.0f));
  else if (t == EType::kF16)
    f(__half(0.0f));
  else
    f(0.0f);
}

/// ld() through L2 only: for values another block of the same kernel wrote
/// (L1 is not coherent across SMs).
__device__ __forceinline__ float ldL2(const void *base, EType t, int64_t i) {
  switch (t) {
  case EType::kBF16: {
    unsigned short bits = __ldcg(static_cast<const unsigned short *>(base) + i);
    return __uint_as_float(static_cast<unsigned>(bits) << 16);
  }
  case EType::kF16:
    return __half2float(__ushort_as_half(__ldcg(static_cast<const unsigned short *>(base) + i)));
  default:
    return __ldcg(static_cast<const float *>(base) + i);
  }
}

__device__ __forceinline__ void st(void *base, EType t, int64_t i, float v) {
  switch (t) {
  case EType::kBF16:
    static_cast<__nv_bfloat16 *>(base)[i] = __float2bfloat16_rn(v);
    return;
  case EType::kF16:
    static_cast<__half *>(base)[i] = __float2half_rn(v);
    return;
  default:
    static_cast<float *>(base)[i] = v;
  }
}

/// Rounds v through storage type t (what a store then load gives).
__device__ __forceinline__ float roundTo(EType t, float v) {
  switch (t) {
  case EType::kBF16:
    return __bfloat162float(__float2bfloat16_rn(v));
  case EType::kF16:
    return __half2float(__float2half_rn(v));
  default:
    return v;
  }
}

} // namespace txc::cuda

#endif
