//===- rope.cuh - q/k RMSNorm and rotary of one staged head ---------------===//
//
// The arithmetic of a decode step's rope: one warp holds one head of one
// token as fp32 (its own d floats in shared memory), applies Qwen3's q/k
// RMSNorm and the rotate-half rotary embedding. Shared by the CUDA backend's
// rope kernel (RopeAppend.cuh) and the decode attention that folds the rope
// in (decode_mma.cuh, DecodeParams::maybe_rope_qkv), so both round alike.
// Every sum and product is spelled with a rounding intrinsic: left to
// itself the compiler contracts `a * b - c * d` into an FMA either way round
// and folds `/ 128` into a multiply-add, differently in each kernel it
// inlines into, and the two paths then differ in the last bf16 bit (measured:
// 0.07 logit difference on the Qwen3 shape, device run 23).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "attention/device_utils.cuh"

namespace txc::kernels {

/// cos and sin of rotary pair i at position `pos`: the fp32 angle as HF
/// computes it, its cos and sin rounded once from double (what HF's fp32
/// cos gives, to the last bit in almost every case), times the attention
/// scaling.
__device__ __forceinline__ void ropeCosSin(const float *inv_freq, int i, float pos, float scaling,
                                           float &c, float &s) {
  const float angle = __fmul_rn(inv_freq[i], pos);
  c = __fmul_rn(static_cast<float>(cos(static_cast<double>(angle))), scaling);
  s = __fmul_rn(static_cast<float>(sin(static_cast<double>(angle))), scaling);
}

/// The inverse RMS of a d-element head from each lane's sum of squares: the
/// lanes' sums meet by butterfly. The one place of the formula and its
/// rounding, for the staged head and the head in registers alike.
__device__ __forceinline__ float headInverseRms(float local, int d, float eps) {
  for (int o = 16; o > 0; o >>= 1)
    local = __fadd_rn(local, __shfl_xor_sync(0xffffffffu, local, o));
  return __frcp_rn(__fsqrt_rn(__fadd_rn(__fdiv_rn(local, static_cast<float>(d)), eps)));
}

/// Rotate-half of one pair (x1 = element i, x2 = element i + half).
__device__ __forceinline__ void rotatePair(float &x1, float &x2, float c, float s) {
  const float a = x1, b = x2;
  x1 = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  x2 = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
}

/// RMSNorm of the staged head, weight(i) its i-th weight.
template <typename Weight>
__device__ __forceinline__ void rmsNormStagedHead(float *head, int d, float eps, Weight weight, int lane) {
  float local = 0.0f;
  for (int i = lane; i < d; i += 32)
    local = __fmaf_rn(head[i], head[i], local);
  const float inv_rms = headInverseRms(local, d, eps);
  __syncwarp();
  for (int i = lane; i < d; i += 32)
    head[i] = __fmul_rn(__fmul_rn(head[i], inv_rms), weight(i));
  __syncwarp();
}

/// Rotate-half on the pairs (i, i + half), i < half; cos_sin(i, c, s) gives
/// pair i's factors (ropeCosSin, or values it computed earlier).
template <typename CosSin>
__device__ __forceinline__ void rotateStagedHead(float *head, int half, CosSin cos_sin, int lane) {
  for (int i = lane; i < half; i += 32) {
    float c, s;
    cos_sin(i, c, s);
    rotatePair(head[i], head[i + half], c, s);
  }
  __syncwarp();
}

/// A head of compile-time size D in one warp's registers: lane holds
/// elements lane + 32 k, k < D / 32. The staged loops above visit a lane's
/// elements in the same order, so both forms round alike; with the trip
/// counts known every load goes out at once, where the staged loops (their
/// trip count depends on the lane) stay rolled and wait on each shared-
/// memory load in turn (the decode attention's fold, device run 100: 2.4K
/// cycles for one q head).
template <int D> struct HeadInRegisters {
  static_assert(D % 64 == 0, "a lane holds both elements of its rotary pairs");
  static constexpr int kPerLane = D / 32;
  float x[kPerLane];

  __device__ __forceinline__ void load(const float *head, int lane) {
#pragma unroll
    for (int k = 0; k < kPerLane; ++k)
      x[k] = head[lane + 32 * k];
  }
  __device__ __forceinline__ void store(float *head, int lane) const {
#pragma unroll
    for (int k = 0; k < kPerLane; ++k)
      head[lane + 32 * k] = x[k];
  }
  /// rmsNormStagedHead's arithmetic.
  template <typename Weight> __device__ __forceinline__ void rmsNorm(float eps, Weight weight, int lane) {
    float local = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k)
      local = __fmaf_rn(x[k], x[k], local);
    const float inv_rms = headInverseRms(local, D, eps);
#pragma unroll
    for (int k = 0; k < kPerLane; ++k)
      x[k] = __fmul_rn(__fmul_rn(x[k], inv_rms), weight(lane + 32 * k));
  }
  /// rotateStagedHead's arithmetic over the whole head (half = D / 2): pair
  /// i = lane + 32 k pairs with i + D / 2, element k + D / 64 of this lane.
  template <typename CosSin> __device__ __forceinline__ void rotateWhole(CosSin cos_sin, int lane) {
#pragma unroll
    for (int k = 0; k < kPerLane / 2; ++k) {
      float c, s;
      cos_sin(lane + 32 * k, c, s);
      rotatePair(x[k], x[k + kPerLane / 2], c, s);
    }
  }
};

} // namespace txc::kernels
