//===- split_heuristic.cpp - Choosing the split-KV factor of decode -------===//
#include "attention/split_heuristic.h"

#include <algorithm>

namespace txc::kernels {

int chooseDecodeSplits(const DecodeSplitInputs &in) {
  const long long base_ctas = (long long)std::max(in.batch, 1) * std::max(in.num_kv_heads, 1);
  const long long resident_ctas = (long long)std::max(in.num_sms, 1) * std::max(in.ctas_per_sm, 1);
  const int min_chunk = std::max(in.min_tokens_per_split, 1);
  const int max_by_length = std::max(1, in.max_kv_len / min_chunk);
  const int cap = std::max(1, std::min(in.max_splits, max_by_length));
  const int floor = std::max(1, std::min(in.min_splits, cap));

  // The most splits whose grid fits one wave of resident CTAs. A grid that
  // spills a few CTAs past a wave runs a second, almost empty wave of whole
  // chunks, and two exact waves read slower than one (attention_bench's split
  // sweep, run 246: one wave 84-98% of copy at batches 2-24, a spill of 8-120
  // CTAs 57-88%, two waves 65-92%). Past a wave without splits, no split: more
  // would only add merge traffic.
  const int fit = (int)std::max(1LL, resident_ctas / base_ctas);
  int splits = std::max(std::min(fit, cap), floor);
  // Even out the chunks: the same number of waves with equal-length chunks.
  if (splits > 1) {
    const int chunk = (in.max_kv_len + splits - 1) / splits;
    splits = (in.max_kv_len + chunk - 1) / chunk;
  }
  return std::max(splits, 1);
}

} // namespace txc::kernels
