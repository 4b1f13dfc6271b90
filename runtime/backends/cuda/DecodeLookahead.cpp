//===- DecodeLookahead.cpp - The next decode step, queued ahead -----------===//
//
// CudaExecutorOptions::decode_lookahead: a decode step on a graph whose
// tokens are drawn on the GPU (the argmax, or the sampler with the engine's
// next uniforms) queues the step after it before its own tokens are read,
// so the GPU goes from step to step while the host reads tokens and
// schedules (device run 192: the GPU waited ~7 us a step for the host on
// the H200).
//
//===----------------------------------------------------------------------===//
// First, on its own: it settles the TXC_RETURN_IF_ERROR clash (see there).
#include "runtime/backends/cuda/ExecutorState.h"

#include "runtime/backends/cuda/Sampler.h"

#include <algorithm>

namespace txc::cuda {

bool CudaExecutor::State::lookaheadEligible(const engine::Batch &b, const float *logits,
                                            const int32_t *tokens,
                                            const std::vector<engine::RowSampling> *sampling) const {
  if (!options.decode_lookahead || logits || !tokens || !sampling || d_trace || profile ||
      !graphable(b) || sampling->size() != static_cast<size_t>(b.numSequences()))
    return false;
  if (options.device_sampling)
    return true;
  // Rows sampled on the host need their logits back first.
  return std::all_of(sampling->begin(), sampling->end(), engine::isGreedy);
}

// The step queued ahead is done with: waited for, its results dropped.
Status CudaExecutor::State::drainLookahead() {
  if (!ahead.pending)
    return Status::ok();
  ahead.pending = false;
  return cudaStatus(cudaEventSynchronize(ahead.end), path + ": a decode step queued ahead");
}

namespace {
bool sameDraw(const engine::RowSampling &a, const engine::RowSampling &b) {
  return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p &&
         a.uniform == b.uniform;
}
} // namespace

// Whether the step queued ahead ran `b`: the same rows in the same order,
// each with the same position, slot, context, token, draw and the pages that
// hold its context (the engine may have added the next one since:
// SchedulerConfig::reserve_next_page; the step read none past its context).
// A batch of fewer rows (one stopped on a stop token) does not take it: the
// step is waited for and dropped, so the queued step always holds what a
// step run alone would (device run 197 took such steps by their rows; its
// differences from step by step were the argmax losing rows' tokens after a
// launch of more rows, fixed in argmaxKernel's workspace layout, not the
// take).
bool CudaExecutor::State::aheadMatches(const engine::Batch &b,
                                       const std::vector<engine::RowSampling> &sampling) const {
  const engine::Batch &p = ahead.batch;
  if (!ahead.pending || b.max_pages_per_seq != p.max_pages_per_seq ||
      b.numSequences() != p.numSequences())
    return false;
  const size_t stride = static_cast<size_t>(b.max_pages_per_seq);
  for (int32_t i = 0; i < b.numSequences(); ++i) {
    if (p.request_ids[i] != b.request_ids[i] || p.token_ids[i] != b.token_ids[i] ||
        p.positions[i] != b.positions[i] || p.slot_mapping[i] != b.slot_mapping[i] ||
        p.context_lens[i] != b.context_lens[i] || !sameDraw(ahead.sampling[i], sampling[i]))
      return false;
    const size_t used = std::min(stride, static_cast<size_t>((b.context_lens[i] + page_size - 1) / page_size));
    if (!std::equal(b.block_tables.begin() + i * stride, b.block_tables.begin() + i * stride + used,
                    p.block_tables.begin() + i * stride))
      return false;
  }
  return true;
}

// The tokens of the `n` rows of device_logits into device_tokens: the argmax
// where every row is greedy (no `sampling`: all are), which also writes them
// over this step's token ids in the inputs (the next step's, queued ahead: no
// copy between the graphs), else the sampler, its rows staged through one
// half of the pinned buffer (the other may still feed the step before).
Status CudaExecutor::State::enqueueDraw(int32_t n, const std::vector<engine::RowSampling> *sampling) {
  const bool all_greedy =
      !sampling || std::all_of(sampling->begin(), sampling->begin() + n, engine::isGreedy);
  draw_fed_token_ids = all_greedy;
  if (all_greedy)
    return cudaStatus(launchArgmax(device_logits, n, vocab_size, argmax_workspace, device_tokens, stream,
                                   const_cast<int32_t *>(d_tokens)),
                      path + ": greedy sampling");
  sampling_half ^= 1;
  engine::RowSampling *staged = host_row_sampling + static_cast<size_t>(sampling_half) * max_num_seqs;
  std::copy(sampling->begin(), sampling->begin() + n, staged);
  CU(cudaMemcpyAsync(device_row_sampling, staged, sizeof(engine::RowSampling) * n,
                     cudaMemcpyHostToDevice, stream),
     path + ": copying the sampling parameters");
  return cudaStatus(launchSampling(device_logits, n, vocab_size, device_row_sampling, sampling_workspace,
                                   sampling_workspace_bytes, device_tokens, stream),
                    path + ": sampling");
}

// Queues `b` on its graph with its draw and the copy of its tokens into
// `host`, between `start` and `end`; its token ids as runDecodeGraph takes
// them.
Status CudaExecutor::State::enqueueStep(const engine::Batch &b,
                                        const std::vector<engine::RowSampling> &sampling,
                                        cudaEvent_t start, cudaEvent_t end, int32_t *host,
                                        const int32_t *device_token_ids, bool token_ids_in_place) {
  CU(cudaEventRecord(start, stream), path + ": event");
  Status status = runDecodeGraph(b, device_token_ids, token_ids_in_place);
  if (status.isOk())
    status = enqueueDraw(b.numSequences(), &sampling);
  if (status.isOk())
    status = cudaStatus(cudaMemcpyAsync(host, device_tokens, static_cast<size_t>(b.numSequences()) * 4,
                                        cudaMemcpyDeviceToHost, stream),
                        path + ": copying the sampled tokens back");
  cudaEventRecord(end, stream);
  batch = nullptr;
  return status;
}

// Queues the step after `b` (just queued, its tokens in device_tokens) for
// the rows that go on (RowSampling::goes_on: the engine's next batch unless a
// stop token intervenes), each one position on, at a slot of a page its table
// holds already (the engine's reserve_next_page gives it a step early). The
// rows that end here must be `b`'s last (the next step's token ids are the
// first of device_tokens, in place); none is queued where one is not, where
// none goes on, or where a row needs a page the engine has not given, reaches
// max_seq_len, or writes no slot. Its token ids here are filled in by
// decodeStepAhead with the tokens `b` returns. Its draws are `sampling`'s
// with the next uniforms.
Status CudaExecutor::State::enqueueLookahead(const engine::Batch &b,
                                             const std::vector<engine::RowSampling> &sampling) {
  const int32_t stride = b.max_pages_per_seq;
  int32_t n = 0;
  while (n < b.numSequences() && sampling[n].goes_on)
    ++n;
  if (n == 0 || std::any_of(sampling.begin() + n, sampling.begin() + b.numSequences(),
                            [](const engine::RowSampling &row) { return row.goes_on; }))
    return Status::ok(); // none goes on, or a row that ends sits before one that goes on
  for (int32_t i = 0; i < n; ++i) {
    const int32_t position = b.positions[i] + 1, page = position / page_size;
    if (b.slot_mapping[i] < 0 || b.context_lens[i] >= max_seq_len || page >= stride ||
        b.block_tables[static_cast<size_t>(i) * stride + page] < 0)
      return Status::ok(); // a row that writes no slot, is at its end, or needs a page
  }
  engine::Batch &p = ahead.batch;
  p = b;
  p.token_ids.resize(n);
  p.positions.resize(n);
  p.slot_mapping.resize(n);
  p.context_lens.resize(n);
  p.request_ids.resize(n);
  p.query_start_offsets.resize(static_cast<size_t>(n) + 1);
  p.logits_indices.resize(n);
  p.block_tables.resize(static_cast<size_t>(n) * stride);
  ahead.sampling.assign(sampling.begin(), sampling.begin() + n);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t position = b.positions[i] + 1;
    const int32_t page = b.block_tables[static_cast<size_t>(i) * stride + position / page_size];
    p.positions[i] = position;
    p.context_lens[i] = b.context_lens[i] + 1;
    p.slot_mapping[i] = page * page_size + position % page_size;
    ahead.sampling[i].uniform = sampling[i].next_uniform;
    ahead.sampling[i].next_uniform = 0.0;
  }
  Status status = enqueueStep(p, ahead.sampling, ahead.start, ahead.end, ahead.host_tokens, device_tokens,
                              draw_fed_token_ids);
  ahead.pending = true;
  ++ahead.queued;
  return withContext("queueing the next decode step ahead", status);
}

// A decode step with its tokens drawn on the GPU, with the step after it
// queued before this one's tokens are read. The engine's batch either is the
// step queued ahead by the call before (aheadMatches) or is queued now;
// either way the next one is queued behind it, so the GPU goes from step to
// step while the host reads tokens and schedules.
Status CudaExecutor::State::decodeStepAhead(const engine::Batch &b,
                                            const std::vector<engine::RowSampling> &sampling,
                                            int32_t *tokens) {
  const int32_t n = b.numSequences();
  const bool queued = aheadMatches(b, sampling);
  Status status = Status::ok();
  if (queued) {
    std::swap(step_start, ahead.start);
    std::swap(step_end, ahead.end);
    std::swap(host_tokens, ahead.host_tokens);
    ahead.pending = false;
    ++ahead.taken;
  } else {
    TXC_RETURN_IF_ERROR(drainLookahead());
    status = enqueueStep(b, sampling, step_start, step_end, host_tokens, nullptr, false);
  }
  if (status.isOk())
    status = enqueueLookahead(b, sampling);
  Status sync = cudaStatus(cudaEventSynchronize(step_end), path + ": running the step on the GPU");
  if (!status.isOk() || !sync.isOk()) {
    cudaStreamSynchronize(stream);
    ahead.pending = false;
    TXC_RETURN_IF_ERROR(status);
    return sync;
  }
  std::copy(host_tokens, host_tokens + n, tokens);
  if (ahead.pending)
    std::copy(tokens, tokens + ahead.batch.numSequences(), ahead.batch.token_ids.begin());
  cudaEventElapsedTime(&last_step_ms, step_start, step_end);
  return Status::ok();
}

int64_t CudaExecutor::decodeStepsRunAhead() const { return state_->ahead.taken; }
int64_t CudaExecutor::decodeStepsQueuedAhead() const { return state_->ahead.queued; }

} // namespace txc::cuda
