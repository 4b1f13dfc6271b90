//===- Request.h - What callers submit and what streams back ---*- C++ -*-===//
#ifndef TXC_ENGINE_REQUEST_H
#define TXC_ENGINE_REQUEST_H

#include "txc/engine/Sampling.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace txc::engine {

using RequestId = int64_t;

struct Request {
  std::vector<int32_t> prompt_ids;
  SamplingParams sampling;
};

enum class FinishReason {
  kNone,   // still generating
  kStop,   // produced an EOS or stop token (included in the output)
  kLength, // reached max_new_tokens or the artifact's max_seq_len
  kError,  // the step executor failed; see the Status from Engine::step
};

const char *finishReasonName(FinishReason reason);

/// One generated token, streamed as soon as it is sampled.
struct TokenEvent {
  RequestId request = -1;
  int32_t token = -1;
  /// 0 for the first generated token.
  int32_t index = 0;
  /// True on the request's last event; finish_reason says why.
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
};

/// Called on the thread that drives the engine, in generation order. A
/// kError finish arrives with token -1.
using TokenCallback = std::function<void(const TokenEvent &)>;

struct RequestResult {
  RequestId request = -1;
  std::vector<int32_t> output_ids;
  FinishReason finish_reason = FinishReason::kNone;
};

} // namespace txc::engine

#endif // TXC_ENGINE_REQUEST_H
