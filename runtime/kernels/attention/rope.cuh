//===- rope.cuh - q/k RMSNorm and rotary of one staged head ---------------===//
//
// The arithmetic of a decode step's rope: one warp holds one head of one
// token as fp32 (its own d floats in shared memory), applies Qwen3's q/k
// RMSNorm and the rotate-half rotary embedding. Shared by the CUDA backend's
// rope kernel (RopeAppend.cuh) and the decode attention that folds the rope
// in (decode_mma.cuh, DecodeParams::maybe_rope_qkv), so both round alike.
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
  const float angle = inv_freq[i] * pos;
  c = static_cast<float>(cos(static_cast<double>(angle))) * scaling;
  s = static_cast<float>(sin(static_cast<double>(angle))) * scaling;
}

/// RMSNorm of the staged head, weight(i) its i-th weight.
template <typename Weight>
__device__ __forceinline__ void rmsNormStagedHead(float *head, int d, float eps, Weight weight, int lane) {
  float local = 0.0f;
  for (int i = lane; i < d; i += 32)
    local += head[i] * head[i];
  for (int o = 16; o > 0; o >>= 1)
    local += __shfl_xor_sync(0xffffffffu, local, o);
  const float inv_rms = 1.0f / sqrtf(local / static_cast<float>(d) + eps);
  __syncwarp();
  for (int i = lane; i < d; i += 32)
    head[i] = head[i] * inv_rms * weight(i);
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
    head[i] = x1 * c - x2 * s;
    head[i + half] = x2 * c + x1 * s;
  }
  __syncwarp();
}

} // namespace txc::kernels
