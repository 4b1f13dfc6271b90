//===- AttentionKernel.cpp - txk.attention over the paged cache -----------===//
//
// For query token t of sequence s at position p and head h (KV head
// h / (num_heads / num_kv_heads)):
//   out = softmax(cap(q . K[j] * scale)) @ V[j]
// over the keys j of s with j <= p when causal and p - window < j when a
// sliding window is set (HF's convention), cap(x) = c * tanh(x / c). Keys
// and values come from the cache through the block table; softmax in fp32
// with the running maximum subtracted.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace txc::cpu {

Status validateBatchAgainstCache(const BatchView &batch,
                                 const KvCacheLayer &cache) {
  for (int32_t s = 0; s < batch.num_seqs; ++s) {
    int64_t context = batch.context_lens[s];
    int64_t pages = (context + cache.page_size - 1) / cache.page_size;
    if (pages > batch.max_pages_per_seq)
      return outOfRange("sequence " + std::to_string(s) + " has " +
                        std::to_string(context) + " tokens, more than " +
                        std::to_string(batch.max_pages_per_seq) +
                        " block-table pages hold");
    for (int64_t i = 0; i < pages; ++i) {
      int32_t page = batch.block_tables[s * batch.max_pages_per_seq + i];
      if (page < 0 || page >= cache.num_pages)
        return outOfRange("sequence " + std::to_string(s) + " block-table "
                          "entry " + std::to_string(i) + " is page " +
                          std::to_string(page) + ", outside the cache's " +
                          std::to_string(cache.num_pages) + " pages");
    }
  }
  return Status::ok();
}

Status validateCacheGeometry(const KvCacheLayer &cache, int64_t kv_heads,
                             int64_t head_dim) {
  if (cache.kv_heads != kv_heads || cache.head_dim != head_dim)
    return invalidArgument("KV cache layer holds " +
                           std::to_string(cache.kv_heads) + " heads of " +
                           std::to_string(cache.head_dim) + ", the launch " +
                           std::to_string(kv_heads) + " of " +
                           std::to_string(head_dim));
  return Status::ok();
}

Status attentionKernel(const ConstMatrix &query, const KvCacheLayer &cache,
                       const BatchView &batch, const AttentionParams &params,
                       const Matrix &out, ThreadPool &pool) {
  const int64_t heads = params.num_heads, kv_heads = params.num_kv_heads,
                head_dim = params.head_dim;
  if (heads <= 0 || kv_heads <= 0 || head_dim <= 0 || heads % kv_heads != 0)
    return invalidArgument("num_heads " + std::to_string(heads) +
                           " must be a positive multiple of num_kv_heads " +
                           std::to_string(kv_heads));
  if (query.cols != heads * head_dim || query.rows != batch.num_tokens)
    return invalidArgument("attention query " +
                           shapeString(query.rows, query.cols) + " must be " +
                           shapeString(batch.num_tokens, heads * head_dim));
  if (out.rows != query.rows || out.cols != query.cols)
    return invalidArgument("attention result " +
                           shapeString(out.rows, out.cols) + " must be " +
                           shapeString(query.rows, query.cols));
  TXC_RETURN_IF_ERROR(validateCacheGeometry(cache, kv_heads, head_dim));
  TXC_RETURN_IF_ERROR(validateBatchAgainstCache(batch, cache));

  std::vector<int32_t> sequence_of(static_cast<size_t>(batch.num_tokens));
  for (int32_t s = 0; s < batch.num_seqs; ++s)
    for (int32_t t = batch.query_start_offsets[s];
         t < batch.query_start_offsets[s + 1]; ++t)
      sequence_of[t] = s;

  const int64_t group = heads / kv_heads;
  const float scale = static_cast<float>(params.scale);
  const float softcap = static_cast<float>(params.logit_softcap);
  pool.parallelFor(batch.num_tokens * heads, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> q(static_cast<size_t>(head_dim));
    std::vector<float> kv(static_cast<size_t>(head_dim));
    std::vector<float> acc(static_cast<size_t>(head_dim));
    std::vector<float> scores;
    for (int64_t item = begin; item < end; ++item) {
      int64_t t = item / heads, h = item % heads, kv_head = h / group;
      int32_t s = sequence_of[t];
      int64_t position = batch.positionOf(s, static_cast<int32_t>(t));
      int64_t context = batch.context_lens[s];
      int64_t last = params.causal ? std::min(position, context - 1) : context - 1;
      int64_t first = 0;
      if (params.sliding_window > 0)
        first = std::max<int64_t>(0, position - params.sliding_window + 1);
      loadRow(query.data, query.dtype,
              static_cast<size_t>(t * query.cols + h * head_dim),
              static_cast<size_t>(head_dim), q.data());
      std::fill(acc.begin(), acc.end(), 0.0f);
      const int32_t *block_table = batch.block_tables + s * batch.max_pages_per_seq;
      auto slotOf = [&](int64_t j) {
        return static_cast<int64_t>(block_table[j / cache.page_size]) *
                   cache.page_size + j % cache.page_size;
      };

      scores.assign(static_cast<size_t>(std::max<int64_t>(0, last - first + 1)), 0.0f);
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t j = first; j <= last; ++j) {
        loadRow(cache.data, cache.dtype, cache.elementIndex(0, slotOf(j), kv_head),
                static_cast<size_t>(head_dim), kv.data());
        float score = 0.0f;
        for (int64_t d = 0; d < head_dim; ++d)
          score += q[d] * kv[d];
        score *= scale;
        if (softcap > 0.0f)
          score = softcap * std::tanh(score / softcap);
        scores[j - first] = score;
        max_score = std::max(max_score, score);
      }
      float denominator = 0.0f;
      for (int64_t j = first; j <= last; ++j) {
        float weight = std::exp(scores[j - first] - max_score);
        denominator += weight;
        loadRow(cache.data, cache.dtype, cache.elementIndex(1, slotOf(j), kv_head),
                static_cast<size_t>(head_dim), kv.data());
        for (int64_t d = 0; d < head_dim; ++d)
          acc[d] += weight * kv[d];
      }
      // A query that sees no key (impossible for causal attention over its
      // own token) yields zeros rather than NaN.
      float inv = denominator > 0.0f ? 1.0f / denominator : 0.0f;
      for (int64_t d = 0; d < head_dim; ++d)
        storeElement(out.data, out.dtype,
                     static_cast<size_t>(t * out.cols + h * head_dim + d),
                     acc[d] * inv);
    }
  });
  return Status::ok();
}

} // namespace txc::cpu
