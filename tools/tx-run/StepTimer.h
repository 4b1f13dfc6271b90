//===- StepTimer.h - where a step's time goes, for tx-run --timing -*- C++ -*-===//
//
// Wraps the backend's StepExecutor and records, per step, its host wall time
// and (from the CUDA backend) the GPU stream time between its first and
// last event. A step's wall time is its execute() call, except for a decode
// step right after another: there it is the time from the previous step's
// return to its own, the token interval the engine sees (its scheduling
// included). A backend that queues the next decode step before returning
// (the CUDA backend's decode lookahead) spends part of a step's time before
// the call; the interval counts it. Decode steps (one new token per
// sequence) are kept apart from prefill steps.
//
//===----------------------------------------------------------------------===//

#ifndef TXC_TOOLS_TX_RUN_STEPTIMER_H
#define TXC_TOOLS_TX_RUN_STEPTIMER_H

#include "txc/engine/Engine.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace txc::tools {

class StepTimer : public engine::StepExecutor {
public:
  /// `gpuMs` returns the GPU time of the last step, or a negative number
  /// when the backend has none.
  StepTimer(engine::StepExecutor &inner, std::function<float()> gpuMs)
      : inner_(inner), gpuMs_(std::move(gpuMs)) {}

  int32_t vocabSize() const override { return inner_.vocabSize(); }

  Status execute(const engine::Batch &batch, float *logits) override {
    return timed(batch, [&] { return inner_.execute(batch, logits); });
  }
  bool hasDeviceSampling() const override { return inner_.hasDeviceSampling(); }
  Status executeSampled(const engine::Batch &batch,
                        const std::vector<engine::RowSampling> &sampling,
                        int32_t *tokens) override {
    return timed(batch, [&] { return inner_.executeSampled(batch, sampling, tokens); });
  }

  struct Summary {
    size_t decodeSteps = 0, prefillSteps = 0;
    double decodeWallMs = 0, decodeGpuMs = -1, prefillWallMs = 0, prefillGpuMs = -1;
  };
  Summary summary() const {
    return {decodeWall_.size(), prefillWall_.size(), median(decodeWall_),
            decodeGpu_.empty() ? -1 : median(decodeGpu_), median(prefillWall_),
            prefillGpu_.empty() ? -1 : median(prefillGpu_)};
  }

private:
  template <typename Run> Status timed(const engine::Batch &batch, Run run) {
    const bool decode = batch.numTokens() == batch.numSequences();
    auto start = decode && last_was_decode_ ? last_return_ : std::chrono::steady_clock::now();
    Status status = run();
    last_return_ = std::chrono::steady_clock::now();
    last_was_decode_ = decode && status.isOk();
    double wall = std::chrono::duration<double, std::milli>(last_return_ - start).count();
    (decode ? decodeWall_ : prefillWall_).push_back(wall);
    if (float gpu = gpuMs_(); gpu >= 0)
      (decode ? decodeGpu_ : prefillGpu_).push_back(gpu);
    return status;
  }

  static double median(std::vector<double> v) {
    if (v.empty())
      return 0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }

  engine::StepExecutor &inner_;
  std::function<float()> gpuMs_;
  std::vector<double> decodeWall_, prefillWall_, decodeGpu_, prefillGpu_;
  std::chrono::steady_clock::time_point last_return_;
  bool last_was_decode_ = false;
};

} // namespace txc::tools

#endif // TXC_TOOLS_TX_RUN_STEPTIMER_H
