//===- Engine.cpp - Requests in, tokens out -------------------------------===//
#include "txc/engine/Engine.h"

#include <algorithm>
#include <string>

namespace txc::engine {

const char *finishReasonName(FinishReason reason) {
  switch (reason) {
  case FinishReason::kNone: return "none";
  case FinishReason::kStop: return "stop";
  case FinishReason::kLength: return "length";
  case FinishReason::kError: return "error";
  }
  return "unknown";
}

Engine::Engine(StepExecutor &executor, EngineConfig config)
    : executor_(executor), config_(std::move(config)),
      scheduler_(config_.scheduler) {}

StatusOr<std::unique_ptr<Engine>> Engine::create(StepExecutor &executor,
                                                 EngineConfig config) {
  TXC_RETURN_IF_ERROR(config.scheduler.validate());
  int32_t vocab = executor.vocabSize();
  if (vocab < 1)
    return invalidArgument("the step executor reports a vocabulary of " +
                           std::to_string(vocab) + " tokens");
  for (int32_t eos : config.eos_token_ids)
    if (eos < 0 || eos >= vocab)
      return invalidArgument("EOS token " + std::to_string(eos) +
                             " is outside the vocabulary of " + std::to_string(vocab));
  return std::unique_ptr<Engine>(new Engine(executor, std::move(config)));
}

StatusOr<RequestId> Engine::submit(Request request, TokenCallback on_token) {
  int32_t vocab = executor_.vocabSize();
  TXC_RETURN_IF_ERROR(validateSamplingParams(request.sampling, vocab));
  for (size_t i = 0; i < request.prompt_ids.size(); ++i) {
    int32_t token = request.prompt_ids[i];
    if (token < 0 || token >= vocab)
      return invalidArgument("prompt token " + std::to_string(i) + " is " +
                             std::to_string(token) + ", outside the vocabulary of " +
                             std::to_string(vocab));
  }
  TXC_RETURN_IF_ERROR(scheduler_.admissible(request.prompt_ids, request.sampling));

  auto sequence = std::make_unique<Sequence>();
  sequence->id = next_id_++;
  sequence->prompt_len = static_cast<int32_t>(request.prompt_ids.size());
  sequence->tokens = std::move(request.prompt_ids);
  sequence->sampling = std::move(request.sampling);
  sequence->on_token = std::move(on_token);
  RequestId id = sequence->id;
  scheduler_.add(std::move(sequence));
  return id;
}

bool Engine::isStopToken(const Sequence &sequence, int32_t token) const {
  const std::vector<int32_t> &stops = sequence.sampling.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end())
    return true;
  return !sequence.sampling.ignore_eos &&
         std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(),
                   token) != config_.eos_token_ids.end();
}

Status Engine::failAll(Status cause) {
  for (Sequence *sequence : scheduler_.allSequences()) {
    sequence->finish_reason = FinishReason::kError;
    if (sequence->on_token)
      sequence->on_token(TokenEvent{sequence->id, -1, sequence->numGenerated(),
                                    true, FinishReason::kError});
    scheduler_.finish(sequence);
  }
  return cause;
}

Status Engine::step() {
  if (scheduler_.idle())
    return Status::ok();
  ScheduledBatch scheduled = scheduler_.schedule();
  if (scheduled.empty())
    return failAll(internalError(
        "scheduler made no progress: " + std::to_string(scheduler_.numWaiting()) +
        " waiting, " + std::to_string(scheduler_.numRunning()) + " running, " +
        std::to_string(scheduler_.pages().numFreePages()) + " free KV pages"));

  int32_t vocab = executor_.vocabSize();
  const Batch &batch = scheduled.batch;
  // Backends that sample on the device get each sequence's choices and
  // return tokens: no logits row crosses to the host.
  bool on_device = executor_.hasDeviceSampling();
  Status executed = Status::ok();
  if (on_device) {
    row_sampling_.assign(scheduled.sequences.size(), RowSampling{});
    for (size_t i = 0; i < scheduled.sequences.size(); ++i) {
      if (!scheduled.samples_token[i])
        continue; // greedy on a row nobody reads
      const Sequence &sequence = *scheduled.sequences[i];
      const auto generated = static_cast<uint64_t>(sequence.numGenerated());
      row_sampling_[i] = {sequence.sampling.temperature, sequence.sampling.top_k,
                          sequence.sampling.top_p,
                          samplingUniform(sequence.sampling.seed, generated),
                          samplingUniform(sequence.sampling.seed, generated + 1),
                          scheduler_.goesOn(sequence)};
    }
    device_tokens_.assign(static_cast<size_t>(batch.numSequences()), -1);
    executed = executor_.executeSampled(batch, row_sampling_, device_tokens_.data());
  } else {
    logits_.assign(static_cast<size_t>(batch.numSequences()) * vocab, 0.0f);
    executed = executor_.execute(batch, logits_.data());
  }
  if (!executed.isOk())
    return failAll(Status(executed.code(),
                          "step " + std::to_string(scheduler_.stats().steps) +
                              " (" + std::to_string(batch.numSequences()) +
                              " sequences, " + std::to_string(batch.numTokens()) +
                              " tokens): " + executed.message()));
  scheduler_.markComputed(scheduled);

  for (size_t i = 0; i < scheduled.sequences.size(); ++i) {
    if (!scheduled.samples_token[i])
      continue;
    Sequence &sequence = *scheduled.sequences[i];
    StatusOr<int32_t> token =
        on_device
            ? (device_tokens_[i] >= 0
                   ? StatusOr<int32_t>(device_tokens_[i])
                   : StatusOr<int32_t>(internalError(
                         "the logits row is NaN or all -inf; cannot sample")))
            : sampleToken(logits_.data() + i * vocab, vocab, sequence.sampling,
                          static_cast<uint64_t>(sequence.numGenerated()));
    if (!token.isOk())
      return failAll(Status(token.status().code(),
                            "request " + std::to_string(sequence.id) + ": " +
                                token.status().message()));
    sequence.tokens.push_back(*token);
    if (isStopToken(sequence, *token))
      sequence.finish_reason = FinishReason::kStop;
    else if (sequence.numGenerated() >= sequence.sampling.max_new_tokens ||
             static_cast<int32_t>(sequence.tokens.size()) >=
                 config_.scheduler.max_seq_len)
      sequence.finish_reason = FinishReason::kLength;
    bool finished = sequence.finish_reason != FinishReason::kNone;
    if (sequence.on_token)
      sequence.on_token(TokenEvent{sequence.id, *token, sequence.numGenerated() - 1,
                                   finished, sequence.finish_reason});
    if (finished)
      scheduler_.finish(&sequence);
  }
  return Status::ok();
}

Status Engine::runUntilIdle() {
  while (!scheduler_.idle())
    TXC_RETURN_IF_ERROR(step());
  return Status::ok();
}

StatusOr<std::vector<RequestResult>> Engine::generate(std::vector<Request> requests) {
  std::vector<RequestResult> results(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    RequestResult *result = &results[i];
    StatusOr<RequestId> id =
        submit(std::move(requests[i]), [result](const TokenEvent &event) {
          if (event.token >= 0)
            result->output_ids.push_back(event.token);
          result->finish_reason = event.finish_reason;
        });
    if (!id.isOk())
      return failAll(Status(id.status().code(), "request " + std::to_string(i) +
                                                    ": " + id.status().message()));
    result->request = *id;
  }
  TXC_RETURN_IF_ERROR(runUntilIdle());
  return results;
}

} // namespace txc::engine
