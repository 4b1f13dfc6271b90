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

  int splits = floor;
  // Below a near-full wave: the smallest split count whose grid covers every
  // resident CTA slot, else the largest the chunk minimum allows. At a
  // near-full wave more splits would only add merge traffic.
  if (base_ctas * 5 < resident_ctas * 4) {
    const int to_fill = (int)((resident_ctas + base_ctas - 1) / base_ctas);
    splits = std::max(std::min(to_fill, cap), floor);
  }
  // Even out the chunks: the same number of waves with equal-length chunks.
  if (splits > 1) {
    const int chunk = (in.max_kv_len + splits - 1) / splits;
    splits = (in.max_kv_len + chunk - 1) / chunk;
  }
  return std::max(splits, 1);
}

} // namespace txc::kernels
