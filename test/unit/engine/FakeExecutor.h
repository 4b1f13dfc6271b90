//===- FakeExecutor.h - A StepExecutor that checks the batch it gets ------===//
//
// A stand-in model whose logits are a deterministic function of a
// sequence's whole context, read back through the block tables from its
// own paged "KV cache" (written at the slot mapping). Any batching mistake
// (a wrong slot, block table, position, offset or logits index) changes a
// sequence's logits or trips a consistency check, so "batched equals
// alone" really tests the engine's bookkeeping.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_TEST_UNIT_ENGINE_FAKEEXECUTOR_H
#define TXC_TEST_UNIT_ENGINE_FAKEEXECUTOR_H

#include "txc/engine/Batch.h"

#include <vector>

namespace txc::engine::testing {

class FakeExecutor : public StepExecutor {
public:
  FakeExecutor(int32_t vocab_size, int32_t num_pages, int32_t page_size);

  int32_t vocabSize() const override { return vocab_size_; }
  Status execute(const Batch &batch, float *logits) override;

  /// Every batch executed, for assertions on how the engine batched.
  const std::vector<Batch> &batches() const { return batches_; }
  /// Fail the step with this index (0-based), to test error handling.
  void failAtStep(int64_t step) { fail_at_step_ = step; }

private:
  int32_t vocab_size_;
  int32_t page_size_;
  // The cache: for every slot, the token, position and request written
  // there; -1 is never written.
  std::vector<int32_t> cached_tokens_;
  std::vector<int32_t> cached_positions_;
  std::vector<RequestId> cached_owners_;
  std::vector<Batch> batches_;
  int64_t fail_at_step_ = -1;
};

} // namespace txc::engine::testing

#endif
