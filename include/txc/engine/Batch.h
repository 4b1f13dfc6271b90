//===- Batch.h - One model step's inputs, and who executes it --*- C++ -*-===//
//
// A step runs the model over one flat, ragged batch of tokens (vLLM style):
// the new tokens of every scheduled sequence back to back, whether that
// sequence is prefilling its prompt (many tokens, possibly one chunk of it)
// or decoding (one token). Prefill, chunked prefill and decode are the same
// graph; per-sequence metadata tells attention where each sequence's
// queries start and how long its KV context is. The fields map one to one
// onto the plan's step inputs (artifact.proto, StepInputKind).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ENGINE_BATCH_H
#define TXC_ENGINE_BATCH_H

#include "txc/Status.h"
#include "txc/engine/Request.h"
#include "txc/engine/Sampling.h"

#include <cstdint>
#include <vector>

namespace txc::engine {

struct Batch {
  /// [num_tokens] the new tokens of all sequences, sequence after sequence.
  std::vector<int32_t> token_ids;
  /// [num_tokens] each token's position within its sequence.
  std::vector<int32_t> positions;
  /// [num_tokens] KV-cache slot (page * page_size + offset) each token's K
  /// and V are written to.
  std::vector<int32_t> slot_mapping;
  /// [num_seqs + 1] sequence i's tokens are [offsets[i], offsets[i + 1]).
  std::vector<int32_t> query_start_offsets;
  /// [num_seqs] KV length of each sequence after this step (its new tokens
  /// included): the keys its queries attend to, causally.
  std::vector<int32_t> context_lens;
  /// [num_seqs, max_pages_per_seq] row-major; unused entries are -1.
  std::vector<int32_t> block_tables;
  /// Row stride of block_tables: pages for max_seq_len tokens, fixed for an
  /// engine so CUDA graphs can capture it.
  int32_t max_pages_per_seq = 0;
  /// [num_seqs] index into the flat tokens of each sequence's last token,
  /// whose logits the step returns.
  std::vector<int32_t> logits_indices;
  /// [num_seqs] which request each sequence is (host bookkeeping).
  std::vector<RequestId> request_ids;
  /// Tokens belonging to sequences still in prefill (all of them, chunks of
  /// prompts included); the rest are decode tokens.
  int32_t num_prefill_tokens = 0;

  int32_t numTokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t numSequences() const { return static_cast<int32_t>(context_lens.size()); }
};

/// Runs the model for one step. The CPU and CUDA backends implement it.
class StepExecutor {
public:
  virtual ~StepExecutor() = default;
  virtual int32_t vocabSize() const = 0;
  /// Writes the logits of each sequence's last token to row i of `logits`
  /// ([batch.numSequences(), vocabSize()] row-major, fp32), and the new
  /// tokens' K and V to the KV cache at batch.slot_mapping.
  virtual Status execute(const Batch &batch, float *logits) = 0;

  /// Whether executeSampled is implemented. The engine then runs every step
  /// through it and no logits row crosses to the host.
  virtual bool hasDeviceSampling() const { return false; }
  /// execute(), then sequence i's next token drawn from its logits row with
  /// sampling[i] exactly as sampleToken draws it (greedy ties to the lowest
  /// id; the same candidate order, cut-offs and uniform), in tokens[i]; -1
  /// marks a row holding NaN or only -inf, which the engine reports.
  virtual Status executeSampled(const Batch &batch, const std::vector<RowSampling> &sampling,
                                int32_t *tokens) {
    (void)batch;
    (void)sampling;
    (void)tokens;
    return unimplemented("this backend has no on-device sampling");
  }
};

} // namespace txc::engine

#endif // TXC_ENGINE_BATCH_H
