//===- RopeAppendKernel.cpp - txk.rope_append -----------------------------===//
//
// Per token: split packed QKV into heads, RMSNorm q and k heads when the
// model has q/k norms (Qwen3 normalises before rotating), rotate q and k,
// write k and v to the cache slot the batch assigned, and emit rotated q.
// Everything stays fp32 until the single rounding on store.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cpu/Kernels.h"

#include <cmath>
#include <vector>

namespace txc::cpu {

namespace {

void rmsNormHead(float *head, int64_t head_dim, const float *weight,
                 double eps) {
  float sum_squares = 0.0f;
  for (int64_t i = 0; i < head_dim; ++i)
    sum_squares += head[i] * head[i];
  float inv_rms = 1.0f / std::sqrt(sum_squares / static_cast<float>(head_dim) +
                                   static_cast<float>(eps));
  for (int64_t i = 0; i < head_dim; ++i)
    head[i] = head[i] * inv_rms * weight[i];
}

} // namespace

Status ropeAppendKernel(const ConstMatrix &qkv, const int32_t *positions,
                        const KvCacheLayer &cache, const BatchView &batch,
                        const RopeAppendParams &params,
                        const ConstMatrix &maybe_q_norm,
                        const ConstMatrix &maybe_k_norm, const Matrix &out,
                        ThreadPool &pool) {
  const int64_t heads = params.num_heads, kv_heads = params.num_kv_heads,
                head_dim = params.head_dim;
  if (heads <= 0 || kv_heads <= 0 || head_dim <= 0)
    return invalidArgument("num_heads, num_kv_heads and head_dim must be "
                           "positive");
  if (qkv.cols != (heads + 2 * kv_heads) * head_dim)
    return invalidArgument("qkv has " + std::to_string(qkv.cols) +
                           " columns, expected (num_heads + 2 * num_kv_heads) "
                           "* head_dim = " +
                           std::to_string((heads + 2 * kv_heads) * head_dim));
  if (qkv.rows != batch.num_tokens || out.rows != qkv.rows ||
      out.cols != heads * head_dim)
    return invalidArgument("rope_append result " +
                           shapeString(out.rows, out.cols) + " must be " +
                           shapeString(batch.num_tokens, heads * head_dim));
  TXC_RETURN_IF_ERROR(validateCacheGeometry(cache, kv_heads, head_dim));
  for (const ConstMatrix *norm : {&maybe_q_norm, &maybe_k_norm})
    if (norm->present() && norm->rows * norm->cols != head_dim)
      return invalidArgument("q_norm / k_norm weights must have head_dim = " +
                             std::to_string(head_dim) + " elements");
  TXC_RETURN_IF_ERROR(validateRopeParams(params.rope, head_dim));

  // Token -> sequence, and each sequence's rotary table (they differ only
  // for dynamic scaling, whose base depends on the sequence length).
  std::vector<int32_t> sequence_of(static_cast<size_t>(batch.num_tokens));
  for (int32_t s = 0; s < batch.num_seqs; ++s)
    for (int32_t t = batch.query_start_offsets[s];
         t < batch.query_start_offsets[s + 1]; ++t)
      sequence_of[t] = s;
  bool per_sequence = params.rope.scaling == RopeScaling::kDynamic;
  std::vector<RotaryFrequencies> tables;
  if (per_sequence) {
    for (int32_t s = 0; s < batch.num_seqs; ++s)
      tables.push_back(computeRotaryFrequencies(params.rope, head_dim,
                                                batch.context_lens[s]));
  } else {
    tables.push_back(computeRotaryFrequencies(params.rope, head_dim, 0));
  }

  std::vector<float> q_norm, k_norm;
  if (maybe_q_norm.present()) {
    q_norm.resize(static_cast<size_t>(head_dim));
    maybe_q_norm.loadRowF32(0, q_norm.data());
  }
  if (maybe_k_norm.present()) {
    k_norm.resize(static_cast<size_t>(head_dim));
    maybe_k_norm.loadRowF32(0, k_norm.data());
  }
  const int64_t cache_slots = cache.num_pages * cache.page_size;
  for (int32_t t = 0; t < batch.num_tokens; ++t)
    if (batch.slot_mapping[t] >= cache_slots)
      return outOfRange("token " + std::to_string(t) + " maps to KV slot " +
                        std::to_string(batch.slot_mapping[t]) +
                        " beyond the cache's " + std::to_string(cache_slots));

  pool.parallelFor(batch.num_tokens, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(qkv.cols));
    for (int64_t t = begin; t < end; ++t) {
      qkv.loadRowF32(t, row.data());
      const RotaryFrequencies &table =
          tables[per_sequence ? sequence_of[t] : 0];
      for (int64_t h = 0; h < heads + kv_heads; ++h) {
        bool is_query = h < heads;
        float *head = row.data() + h * head_dim;
        const std::vector<float> &norm = is_query ? q_norm : k_norm;
        if (!norm.empty())
          rmsNormHead(head, head_dim, norm.data(), params.norm_eps);
        applyRotary(head, table, positions[t]);
      }
      out.storeRowF32(t, row.data()); // the first heads * head_dim are Q
      int32_t slot = batch.slot_mapping[t];
      if (slot < 0)
        continue; // a padding token (vLLM convention): no cache write
      for (int64_t h = 0; h < kv_heads; ++h) {
        const float *key = row.data() + (heads + h) * head_dim;
        const float *value = row.data() + (heads + kv_heads + h) * head_dim;
        storeRow(cache.data, cache.dtype, cache.elementIndex(0, slot, h),
                 static_cast<size_t>(head_dim), key);
        storeRow(cache.data, cache.dtype, cache.elementIndex(1, slot, h),
                 static_cast<size_t>(head_dim), value);
      }
    }
  });
  return Status::ok();
}

} // namespace txc::cpu
