//===- RopeAppend.cuh - q/k-norm, rotary and KV append of one head -------===//
//
// One warp finishes one head of one token of the QKV projection: q and k
// heads get their RMSNorm (Qwen3's q_norm/k_norm) and the rotary embedding
// (rotate-half pairs elements half a head apart, hence the head staged in
// shared memory); q heads go to the attention's query, k and v heads into
// their paged-cache slot. Used by ropeAppendKernel and by the QKV GEMV's
// epilogue (Gemv.cu), which runs it in the last block to finish a head; the
// arithmetic is the kernel library's (attention/rope.cuh), which the decode
// attention also runs when it folds the rope in.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_ROPEAPPEND_CUH
#define TXC_RUNTIME_BACKENDS_CUDA_ROPEAPPEND_CUH

#include "attention/rope.cuh"
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
    const EType norm_type = is_query ? a.q_norm_type : a.k_norm_type;
    if (norm)
      kernels::rmsNormStagedHead(
          head, static_cast<int>(d), a.norm_eps, [&](int i) { return ld(norm, norm_type, i); },
          lane);
    const float pos = static_cast<float>(a.positions[t]);
    kernels::rotateStagedHead(
        head, static_cast<int>(a.half),
        [&](int i, float &c, float &s) {
          kernels::ropeCosSin(a.inv_freq, i, pos, a.attention_scaling, c, s);
        },
        lane);
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
