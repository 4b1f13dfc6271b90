//===- FakeExecutor.cpp - A StepExecutor that checks the batch it gets ----===//
#include "FakeExecutor.h"

#include "txc/SplitMix64.h"

#include <string>

namespace txc::engine::testing {
namespace {

Status batchError(const std::string &what) {
  return internalError("fake executor: " + what);
}

} // namespace

FakeExecutor::FakeExecutor(int32_t vocab_size, int32_t num_pages, int32_t page_size)
    : vocab_size_(vocab_size), page_size_(page_size),
      cached_tokens_(static_cast<size_t>(num_pages) * page_size, -1),
      cached_positions_(static_cast<size_t>(num_pages) * page_size, -1),
      cached_owners_(static_cast<size_t>(num_pages) * page_size, -1) {}

Status FakeExecutor::execute(const Batch &batch, float *logits) {
  if (static_cast<int64_t>(batches_.size()) == fail_at_step_) {
    batches_.push_back(batch);
    return internalError("injected failure");
  }
  batches_.push_back(batch);
  int32_t num_tokens = batch.numTokens(), num_seqs = batch.numSequences();
  if (batch.positions.size() != size_t(num_tokens) ||
      batch.slot_mapping.size() != size_t(num_tokens) ||
      batch.query_start_offsets.size() != size_t(num_seqs) + 1 ||
      batch.logits_indices.size() != size_t(num_seqs) ||
      batch.block_tables.size() != size_t(num_seqs) * batch.max_pages_per_seq ||
      batch.query_start_offsets.back() != num_tokens)
    return batchError("inconsistent batch sizes");

  // "Attention" writes K/V first: every new token lands at its slot.
  std::vector<RequestId> owner_of_token(num_tokens);
  for (int32_t s = 0; s < num_seqs; ++s)
    for (int32_t t = batch.query_start_offsets[s]; t < batch.query_start_offsets[s + 1]; ++t)
      if (t >= 0 && t < num_tokens)
        owner_of_token[t] = batch.request_ids[s];
  for (int32_t t = 0; t < num_tokens; ++t) {
    int32_t slot = batch.slot_mapping[t];
    if (slot < 0 || size_t(slot) >= cached_tokens_.size())
      return batchError("slot " + std::to_string(slot) + " out of range");
    cached_tokens_[slot] = batch.token_ids[t];
    cached_positions_[slot] = batch.positions[t];
    cached_owners_[slot] = owner_of_token[t];
  }

  for (int32_t s = 0; s < num_seqs; ++s) {
    int32_t begin = batch.query_start_offsets[s], end = batch.query_start_offsets[s + 1];
    int32_t context = batch.context_lens[s];
    if (end <= begin || batch.logits_indices[s] != end - 1)
      return batchError("sequence " + std::to_string(s) + " has a bad query range");
    for (int32_t t = begin; t < end; ++t)
      if (batch.positions[t] != context - (end - t))
        return batchError("sequence " + std::to_string(s) +
                          " positions do not end at its context length");
    // Read the whole context back through the block table.
    uint64_t state = 0x243F6A8885A308D3ULL;
    const int32_t *table = &batch.block_tables[size_t(s) * batch.max_pages_per_seq];
    for (int32_t position = 0; position < context; ++position) {
      int32_t page = table[position / page_size_];
      if (page < 0)
        return batchError("sequence " + std::to_string(s) + " position " +
                          std::to_string(position) + " has no page");
      int32_t slot = page * page_size_ + position % page_size_;
      if (cached_owners_[slot] != batch.request_ids[s])
        return batchError("sequence " + std::to_string(s) + " position " +
                          std::to_string(position) + " reads slot " +
                          std::to_string(slot) + " written by request " +
                          std::to_string(cached_owners_[slot]));
      if (cached_positions_[slot] != position)
        return batchError("sequence " + std::to_string(s) + " position " +
                          std::to_string(position) + " reads slot " +
                          std::to_string(slot) + " holding position " +
                          std::to_string(cached_positions_[slot]));
      state = splitMix64(state ^ static_cast<uint64_t>(cached_tokens_[slot]));
    }
    for (int32_t v = 0; v < vocab_size_; ++v) {
      uint64_t bits = splitMix64(state ^ (uint64_t(v) << 32));
      logits[size_t(s) * vocab_size_ + v] =
          static_cast<float>(bits >> 40) / float(1 << 24) * 8.0f - 4.0f;
    }
  }
  return Status::ok();
}

} // namespace txc::engine::testing
