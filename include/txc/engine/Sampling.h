//===- Sampling.h - Choosing the next token on the CPU ---------*- C++ -*-===//
//
// Greedy, temperature, top-k and top-p sampling, applied in HF's order
// (temperature, then top-k, then top-p). Randomness is counter-based: the
// draw for generated token i of a request is a pure function of
// (seed, i), so a request gives the same tokens whether it runs alone or
// batched with others, in any order, on any run.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ENGINE_SAMPLING_H
#define TXC_ENGINE_SAMPLING_H

#include "txc/Status.h"

#include <cstdint>
#include <vector>

namespace txc::engine {

struct SamplingParams {
  /// Generation stops after this many tokens (or at a stop token, or at the
  /// artifact's max_seq_len).
  int32_t max_new_tokens = 16;
  /// 0 means greedy (argmax; ties go to the lowest token id).
  float temperature = 0.0f;
  /// Keep the k most likely tokens; 0 keeps all.
  int32_t top_k = 0;
  /// Keep the smallest set of most likely tokens whose probability reaches
  /// top_p; 1 keeps all.
  float top_p = 1.0f;
  /// Seeds this request's draws; equal seeds give equal outputs.
  uint64_t seed = 0;
  /// Tokens that end generation besides the model's EOS ids. The stop token
  /// itself is part of the output (as in HF generate).
  std::vector<int32_t> stop_token_ids;
  /// Keep generating through the model's EOS ids (benchmarks).
  bool ignore_eos = false;
};

/// How one sequence's next token is drawn (SamplingParams plus the uniform
/// sampleToken would draw for this step). temperature <= 0 or top_k == 1 is
/// greedy.
struct RowSampling {
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  double uniform = 0.0;
  /// The uniform of the sequence's next token: a backend that queues the
  /// next step before this one's tokens are back draws it with this.
  double next_uniform = 0.0;
  /// Whether the sequence has a step after this one unless this step's token
  /// stops it (not its last new token, not at max_seq_len): a backend queues
  /// the next step ahead with exactly these rows, so it is the batch the
  /// engine schedules next whenever no stop token, admission or preemption
  /// intervenes (Scheduler::goesOn).
  bool goes_on = false;
};

inline bool isGreedy(const RowSampling &row) { return row.temperature <= 0.0f || row.top_k == 1; }

/// Rejects values no sampler can honour, naming the field and the limit.
Status validateSamplingParams(const SamplingParams &params, int32_t vocab_size);

/// The token drawn for generated token number `step` (0-based) of a request
/// with `params`, from one row of logits. Fails only on logits that are NaN
/// or all -inf (a backend bug worth a message, not a crash).
StatusOr<int32_t> sampleToken(const float *logits, int32_t vocab_size,
                              const SamplingParams &params, uint64_t step);

/// sampleToken with the uniform given instead of drawn from (seed, step):
/// what a backend sampling on its own, or checking its device sampler, uses.
StatusOr<int32_t> sampleTokenWithUniform(const float *logits, int32_t vocab_size,
                                         const RowSampling &choice);

/// The uniform [0, 1) value sampleToken draws for (seed, step).
double samplingUniform(uint64_t seed, uint64_t step);

} // namespace txc::engine

#endif // TXC_ENGINE_SAMPLING_H
