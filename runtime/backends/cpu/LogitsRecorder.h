//===- LogitsRecorder.h - Keep the logits each request sampled from -*- C++ -*-===//
//
// The engine samples inside step() and keeps no logits. `tx-run
// --return-logits` and the tests want, per request, the logits row of every
// generated token. This StepExecutor wraps another and copies the rows that
// are sampled: a sequence's row is sampled once its context covers the whole
// prompt. Rows are keyed by context length, so a preempted request that is
// recomputed overwrites its rows instead of duplicating them.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CPU_LOGITSRECORDER_H
#define TXC_RUNTIME_BACKENDS_CPU_LOGITSRECORDER_H

#include "txc/engine/Batch.h"

#include <map>
#include <vector>

namespace txc::cpu {

class LogitsRecorder : public engine::StepExecutor {
public:
  /// `inner` must outlive the recorder.
  explicit LogitsRecorder(engine::StepExecutor &inner) : inner_(inner) {}

  /// Call before the request's first step; the engine numbers requests from
  /// 0 in submission order.
  void expectRequest(engine::RequestId request, int32_t prompt_len) {
    prompt_lens_[request] = prompt_len;
  }

  int32_t vocabSize() const override { return inner_.vocabSize(); }
  Status execute(const engine::Batch &batch, float *logits) override;
  /// Passed through while no request wants its logits kept.
  bool hasDeviceSampling() const override {
    return prompt_lens_.empty() && inner_.hasDeviceSampling();
  }
  Status executeSampled(const engine::Batch &batch,
                        const std::vector<engine::RowSampling> &sampling,
                        int32_t *tokens) override {
    return inner_.executeSampled(batch, sampling, tokens);
  }

  /// The sampled rows of `request`, in generation order.
  std::vector<std::vector<float>> rows(engine::RequestId request) const;

private:
  engine::StepExecutor &inner_;
  std::map<engine::RequestId, int32_t> prompt_lens_;
  std::map<engine::RequestId, std::map<int32_t, std::vector<float>>> rows_;
};

} // namespace txc::cpu

#endif // TXC_RUNTIME_BACKENDS_CPU_LOGITSRECORDER_H
