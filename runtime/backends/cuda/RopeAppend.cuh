//===- RopeAppend.cuh - q/k-norm, rotary and KV append of one head -------===//
//
// One warp finishes one head of one token of the QKV projection: q and k
// heads get their RMSNorm (Qwen3's q_norm/k_norm) and the rotary embedding
// (rotate-half pairs elements half a head apart, hence the head staged in
// shared memory); q heads go to the attention's query, k and v heads into
// their paged-cache slot. Used by ropeAppendKernel and by the QKV GEMV's
// epilogue (Gemv.cu), which runs it in the last block to finish a head.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_ROPEAPPEND_CUH
#define TXC_RUNTIME_BACKENDS_CUDA_ROPEAPPEND_CUH

#include "runtime/backends/cuda/ElementAccess.cuh"

namespace txc::cuda {

/// Head h (q heads first, then k, then v) of token t, already staged as
/// fp32 in `head` (head_dim floats, this warp's own).
__device__ inline void ropeAppendStagedHead(const RopeAppendArgs &a, int64_t t, int64_t h,
                                            float *head, int lane) {
  const int64_t d = a.head_dim;
  const bool is_query = h < a.heads, is_value = h >= a.heads + a.kv_heads;
  if (!is_value) {
    const void *norm = is_query ? a.q_norm : a.k_norm;
    EType norm_type = is_query ? a.q_norm_type : a.k_norm_type;
    if (norm) {
      float local = 0.0f;
      for (int64_t i = lane; i < d; i += 32)
        local += head[i] * head[i];
      for (int o = 16; o > 0; o >>= 1)
        local += __shfl_xor_sync(0xffffffffu, local, o);
      float inv_rms = 1.0f / sqrtf(local / static_cast<float>(d) + a.norm_eps);
      __syncwarp();
      for (int64_t i = lane; i < d; i += 32)
        head[i] = head[i] * inv_rms * ld(norm, norm_type, i);
      __syncwarp();
    }
    float pos = static_cast<float>(a.positions[t]);
    for (int64_t i = lane; i < a.half; i += 32) {
      float angle = a.inv_freq[i] * pos; // fp32, as HF
      // cos/sin of the fp32 angle rounded once: what HF's fp32 cos gives,
      // to the last bit in almost every case.
      float c = static_cast<float>(cos(static_cast<double>(angle))) * a.attention_scaling;
      float s = static_cast<float>(sin(static_cast<double>(angle))) * a.attention_scaling;
      float x1 = head[i], x2 = head[i + a.half];
      head[i] = x1 * c - x2 * s;
      head[i + a.half] = x2 * c + x1 * s;
    }
    __syncwarp();
  }
  if (is_query) {
    for (int64_t i = lane; i < d; i += 32)
      st(a.out, a.out_type, (t * a.heads + h) * d + i, head[i]);
    return;
  }
  int32_t slot = a.slot_mapping[t];
  if (slot < 0)
    return; // padding token: no cache write
  int64_t page = slot / a.page_size, offset = slot % a.page_size;
  int64_t kv_cols = a.kv_heads * d;
  int64_t kv_head = h - a.heads - (is_value ? a.kv_heads : 0);
  int64_t base = page * 2 * a.page_size * kv_cols +
                 ((is_value ? a.page_size : 0) + offset) * kv_cols + kv_head * d;
  for (int64_t i = lane; i < d; i += 32)
    st(a.cache, a.cache_type, base + i, head[i]);
}

} // namespace txc::cuda

#endif
