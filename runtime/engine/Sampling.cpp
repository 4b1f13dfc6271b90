//===- Sampling.cpp - Choosing the next token on the CPU ------------------===//
#include "txc/engine/Sampling.h"
#include "txc/SplitMix64.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace txc::engine {
namespace {

// Most likely first; equal logits keep token order so results never depend
// on the sort's tie-breaking.
struct MoreLikely {
  const float *logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

// Picks from `candidates` (most likely first) with weights `weights`.
int32_t drawFrom(const std::vector<int32_t> &candidates,
                 const std::vector<double> &weights, double total, double u) {
  double target = u * total, cumulative = 0.0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    cumulative += weights[i];
    if (target < cumulative)
      return candidates[i];
  }
  return candidates.back(); // u * total rounded up to total
}

} // namespace

double samplingUniform(uint64_t seed, uint64_t step) {
  uint64_t bits = splitMix64(splitMix64(seed) ^ splitMix64(step + 0x5851F42D4C957F2DULL));
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0); // 2^53
}

Status validateSamplingParams(const SamplingParams &params, int32_t vocab_size) {
  if (params.max_new_tokens < 1)
    return invalidArgument("max_new_tokens is " +
                           std::to_string(params.max_new_tokens) +
                           "; it must be at least 1");
  if (!(params.temperature >= 0.0f) || std::isinf(params.temperature))
    return invalidArgument("temperature is " + std::to_string(params.temperature) +
                           "; it must be finite and >= 0 (0 is greedy)");
  if (params.top_k < 0)
    return invalidArgument("top_k is " + std::to_string(params.top_k) +
                           "; it must be >= 0 (0 keeps all tokens)");
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f))
    return invalidArgument("top_p is " + std::to_string(params.top_p) +
                           "; it must lie in (0, 1]");
  for (int32_t token : params.stop_token_ids)
    if (token < 0 || token >= vocab_size)
      return invalidArgument("stop token " + std::to_string(token) +
                             " is outside the vocabulary of " +
                             std::to_string(vocab_size));
  return Status::ok();
}

StatusOr<int32_t> sampleToken(const float *logits, int32_t vocab_size,
                              const SamplingParams &params, uint64_t step) {
  return sampleTokenWithUniform(logits, vocab_size,
                                {params.temperature, params.top_k, params.top_p,
                                 samplingUniform(params.seed, step)});
}

StatusOr<int32_t> sampleTokenWithUniform(const float *logits, int32_t vocab_size,
                                         const RowSampling &params) {
  float best_logit = -std::numeric_limits<float>::infinity();
  int32_t best = -1;
  for (int32_t token = 0; token < vocab_size; ++token) {
    if (std::isnan(logits[token]))
      return internalError("logits contain NaN at token " +
                           std::to_string(token) + " (vocabulary " +
                           std::to_string(vocab_size) + ")");
    if (logits[token] > best_logit) {
      best_logit = logits[token];
      best = token;
    }
  }
  if (best < 0)
    return internalError("logits are all -inf (vocabulary " +
                         std::to_string(vocab_size) + ")");
  if (params.temperature <= 0.0f || params.top_k == 1)
    return best;

  // Candidates most likely first, cut to top_k when set. Without top-k or
  // top-p no order is needed: draw over the vocabulary as is.
  bool needs_order = params.top_k > 0 || params.top_p < 1.0f;
  std::vector<int32_t> candidates(vocab_size);
  std::iota(candidates.begin(), candidates.end(), 0);
  if (params.top_k > 0 && params.top_k < vocab_size) {
    std::partial_sort(candidates.begin(), candidates.begin() + params.top_k,
                      candidates.end(), MoreLikely{logits});
    candidates.resize(params.top_k);
  } else if (needs_order) {
    std::sort(candidates.begin(), candidates.end(), MoreLikely{logits});
  }

  // Softmax in double around the best logit, so exp never overflows.
  double inverse_temperature = 1.0 / params.temperature;
  std::vector<double> weights(candidates.size());
  double total = 0.0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    weights[i] = std::exp((static_cast<double>(logits[candidates[i]]) - best_logit) *
                          inverse_temperature);
    total += weights[i];
  }
  if (params.top_p < 1.0f) {
    double kept = 0.0;
    size_t keep = 0;
    while (keep < candidates.size()) {
      kept += weights[keep++];
      if (kept >= params.top_p * total)
        break;
    }
    candidates.resize(keep);
    weights.resize(keep);
    total = kept;
  }
  return drawFrom(candidates, weights, total, params.uniform);
}

} // namespace txc::engine
