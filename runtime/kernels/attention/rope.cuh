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

/// RMSNorm of the staged head, weight(i) its i-th weight.
template <typename Weight>
__device__ __forceinline__ void rmsNormStagedHead(float *head, int d, float eps, Weight weight, int lane) {
  float local = 0.0f;
  for (int i = lane; i < d; i += 32)
    local = __fmaf_rn(head[i], head[i], local);
  for (int o = 16; o > 0; o >>= 1)
    local = __fadd_rn(local, __shfl_xor_sync(0xffffffffu, local, o));
  const float inv_rms = __frcp_rn(__fsqrt_rn(__fadd_rn(__fdiv_rn(local, static_cast<float>(d)), eps)));
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
    const float x1 = head[i], x2 = head[i + half];
    head[i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    head[i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
  }
  __syncwarp();
}

} // namespace txc::kernels
