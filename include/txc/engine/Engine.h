//===- Engine.h - Requests in, tokens out ----------------------*- C++ -*-===//
//
// The engine ties the scheduler, a StepExecutor (the CPU or CUDA backend)
// and sampling together. It is driven by one thread: submit() requests,
// then call step() (one model step) or runUntilIdle(); tokens stream to
// each request's callback as they are sampled. A server wraps this loop
// with its own queue and thread.
//
// Example:
//   auto engine = Engine::create(executor, config);
//   auto results = (*engine)->generate({{prompt, sampling}});
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ENGINE_ENGINE_H
#define TXC_ENGINE_ENGINE_H

#include "txc/engine/Scheduler.h"

#include <memory>
#include <vector>

namespace txc::engine {

struct EngineConfig {
  SchedulerConfig scheduler;
  /// The model's EOS ids (ModelConfig.eos_token_ids); they end every request
  /// that does not set ignore_eos.
  std::vector<int32_t> eos_token_ids;
};

class Engine {
public:
  /// `executor` must outlive the engine.
  static StatusOr<std::unique_ptr<Engine>> create(StepExecutor &executor,
                                                  EngineConfig config);

  /// Queues a request. Rejects, with a message naming the limit, prompts
  /// that are empty, hold ids outside the vocabulary or leave no room under
  /// max_seq_len, requests that could never fit the KV cache, and invalid
  /// sampling parameters.
  StatusOr<RequestId> submit(Request request, TokenCallback on_token = {});

  /// Runs one model step over the next batch; does nothing when idle. When
  /// the executor or sampling fails, every unfinished request ends with
  /// FinishReason::kError and the error is returned.
  Status step();
  /// Steps until every submitted request has finished.
  Status runUntilIdle();
  /// Submits `requests`, runs them to completion together, and returns their
  /// results in the same order.
  StatusOr<std::vector<RequestResult>> generate(std::vector<Request> requests);

  bool idle() const { return scheduler_.idle(); }
  const Scheduler &scheduler() const { return scheduler_; }
  const SchedulerStats &stats() const { return scheduler_.stats(); }

private:
  Engine(StepExecutor &executor, EngineConfig config);
  // Ends every unfinished request with kError and returns `cause`.
  Status failAll(Status cause);
  bool isStopToken(const Sequence &sequence, int32_t token) const;

  StepExecutor &executor_;
  EngineConfig config_;
  Scheduler scheduler_;
  RequestId next_id_ = 0;
  std::vector<float> logits_;
  std::vector<RowSampling> row_sampling_; // executeSampled steps
  std::vector<int32_t> device_tokens_;
};

} // namespace txc::engine

#endif // TXC_ENGINE_ENGINE_H
