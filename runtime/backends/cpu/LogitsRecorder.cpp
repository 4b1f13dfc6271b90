//===- LogitsRecorder.cpp - Keep the logits each request sampled from -----===//
#include "runtime/backends/cpu/LogitsRecorder.h"

namespace txc::cpu {

Status LogitsRecorder::execute(const engine::Batch &batch, float *logits) {
  TXC_RETURN_IF_ERROR(inner_.execute(batch, logits));
  const int32_t vocab = inner_.vocabSize();
  for (int32_t s = 0; s < batch.numSequences(); ++s) {
    engine::RequestId request =
        s < static_cast<int32_t>(batch.request_ids.size()) ? batch.request_ids[s] : -1;
    auto prompt = prompt_lens_.find(request);
    if (prompt == prompt_lens_.end() || batch.context_lens[s] < prompt->second)
      continue; // an unknown request, or a prompt chunk that samples nothing
    const float *row = logits + static_cast<size_t>(s) * vocab;
    rows_[request][batch.context_lens[s]].assign(row, row + vocab);
  }
  return Status::ok();
}

std::vector<std::vector<float>>
LogitsRecorder::rows(engine::RequestId request) const {
  std::vector<std::vector<float>> ordered;
  auto it = rows_.find(request);
  if (it == rows_.end())
    return ordered;
  for (const auto &[context, row] : it->second)
    ordered.push_back(row);
  return ordered;
}

} // namespace txc::cpu
