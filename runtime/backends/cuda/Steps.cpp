//===- Steps.cpp - A step: warm-up, CUDA graphs, sampling ------------------===//
// First, on its own: it settles the TXC_RETURN_IF_ERROR clash (see there).
#include "runtime/backends/cuda/ExecutorState.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace txc::cuda {

/// The profile's key for a launch: its op, and for GEMMs the weight's shape
/// (a step's projections differ 10x in size).
std::string CudaExecutor::State::profileLabel(const pb::Launch &launch) const {
  std::string label = launch.op();
  if (launch.operands_size() > 1 && launch.operands(1).ref_case() == pb::ValueRef::kWeightIndex) {
    const auto &shape = artifact->weights()[launch.operands(1).weight_index()].shape;
    if (shape.size() == 2)
      label += " " + std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
  }
  return label;
}

// --- steps -------------------------------------------------------------------

// The first launch of every cuBLASLt and attention kernel loads its module
// (CUDA lazy loading) and the first GEMM of a shape asks cuBLASLt for an
// algorithm: measured, a process's first 2048-token prefill of the
// Qwen3-0.6B shape took 129 ms against 7.5 ms once warm. A server pays that
// at startup, not on its first request: run throwaway prefills of a few
// sizes and a decode step now. They write no cache slot (slot -1) and read
// page 0 only; their logits are discarded.
Status CudaExecutor::State::warmUp() {
  const pb::CompileOptions &compile = artifact->message().options();
  int32_t max_tokens =
      static_cast<int32_t>(compile.max_batch_tokens() > 0 ? compile.max_batch_tokens() : 2048);
  int32_t pages_per_seq = (max_seq_len + page_size - 1) / page_size;
  for (int32_t tokens : {max_tokens, 128, 16, 1}) {
    tokens = std::min({tokens, max_tokens, max_seq_len});
    engine::Batch b;
    b.token_ids.assign(tokens, 0);
    b.positions.resize(tokens);
    for (int32_t t = 0; t < tokens; ++t)
      b.positions[t] = t;
    b.slot_mapping.assign(tokens, -1);
    b.query_start_offsets = {0, tokens};
    b.context_lens = {tokens};
    b.max_pages_per_seq = pages_per_seq;
    b.block_tables.assign(pages_per_seq, 0);
    b.logits_indices = {tokens - 1};
    b.request_ids = {0};
    b.num_prefill_tokens = tokens > 1 ? tokens : 0;
    TXC_RETURN_IF_ERROR(uploadInputs(b));
    Status status = enqueueLaunches(b);
    Status sync = cudaStatus(cudaStreamSynchronize(stream), path + ": warming up");
    batch = nullptr;
    TXC_RETURN_IF_ERROR(
        withContext("warm-up step of " + std::to_string(tokens) + " tokens", status));
    TXC_RETURN_IF_ERROR(sync);
  }
  if (options.tune_decode_attention)
    TXC_RETURN_IF_ERROR(tuneDecodeAttention(max_seq_len, pages_per_seq));
  if (options.capture_graphs_at_start)
    TXC_RETURN_IF_ERROR(captureDecodeGraphs(max_seq_len, pages_per_seq));
  profile_totals.clear();
  return Status::ok();
}

unsigned long long *CudaExecutor::State::takeTraceSlots(const char *kernel) {
  if (!d_trace || !batch || batch->numTokens() != batch->numSequences() ||
      trace_labels.size() >= kMaxTracedLaunches)
    return nullptr;
  trace_labels.push_back(trace_op_label + " / " + kernel);
  return d_trace + kTraceSlotsPerLaunch * (trace_labels.size() - 1);
}

// The traced step's stamps, relative to its first block start.
Status CudaExecutor::State::readTrace() {
  constexpr int S = kTraceSlotsPerLaunch;
  std::vector<unsigned long long> stamps(S * step_trace_labels.size());
  CU(cudaMemcpy(stamps.data(), d_trace, stamps.size() * sizeof(stamps[0]), cudaMemcpyDeviceToHost),
     path + ": reading the step trace");
  unsigned long long origin = ~0ull;
  for (size_t i = 0; i < step_trace_labels.size(); ++i)
    if (stamps[S * i] != 0)
      origin = std::min(origin, stamps[S * i]);
  auto micros = [&](unsigned long long t) {
    return t == 0 ? std::nan("") : (static_cast<double>(t) - static_cast<double>(origin)) / 1000.0;
  };
  last_trace.clear();
  for (size_t i = 0; i < step_trace_labels.size(); ++i) {
    last_trace.push_back({step_trace_labels[i], micros(stamps[S * i]), micros(stamps[S * i + 1]),
                          micros(stamps[S * i + 2]), micros(stamps[S * i + 3]), micros(stamps[S * i + 4]),
                          micros(stamps[S * i + 5]), micros(stamps[S * i + 6]), micros(stamps[S * i + 7]),
                          micros(stamps[S * i + 8]), micros(stamps[S * i + 9])});
    // Block 0's clock: cycles after its wait release, where every point is stamped.
    const unsigned long long *clock = &stamps[S * i + kTraceBlock0Clock];
    bool stamped = true;
    for (int p = 0; p < kTraceBlock0Points; ++p)
      stamped = stamped && clock[p] != 0;
    if (stamped)
      for (int p = 1; p < kTraceBlock0Points; ++p)
        last_trace.back().block0_cycles[p - 1] = static_cast<double>(static_cast<long long>(clock[p] - clock[0]));
  }
  return Status::ok();
}

// Uploads the inputs and enqueues every launch of the plan for `b`.
Status CudaExecutor::State::enqueueLaunches(const engine::Batch &b) {
  batch = &b;
  rows_at_offset.clear();
  gather_aliases.clear();
  wrote_logits = false;
  pending_norm.active = false;
  pending_rope.active = false;
  trace_labels.clear();
  Status status = Status::ok();
  // ~20 ms at 2 GHz, longer than enqueueing a step's launches takes.
  if (profile)
    status = cudaStatus(launchSpin(40'000'000, stream), path + ": profile spin");
  // A decode step that may fold its ropes into the attention: its first
  // kernel, the embedding, computes their rotary factors (StepRopeFactors).
  rope_factor_rows = 0;
  const int32_t seqs = b.numSequences();
  if (decode_attention.rope_in_attention && !fusable_ropes.empty() && step_rope_factors.sets > 0 &&
      b.numTokens() == seqs && seqs <= max_num_seqs)
    rope_factor_rows = seqs;
  for (int i = 0; status.isOk() && i < plan->launches_size(); ++i) {
    const pb::Launch &launch = plan->launches(i);
    if (profile)
      cudaEventRecord(launch_events[i], stream);
    if (d_trace)
      trace_op_label = profileLabel(launch);
    after_attention = i > 0 && plan->launches(i - 1).op() == "txk.attention";
    status = withContext(path + ": " + describeLaunch(i, launch), runLaunch(i, launch));
  }
  if (profile)
    cudaEventRecord(launch_events.back(), stream);
  if (status.isOk() && !wrote_logits)
    status = internalError(path + ": no launch wrote the logits this step");
  return status;
}

namespace {

/// The padded batch size a decode graph is captured for: powers of two up
/// to 8, then multiples of 8 (as vLLM's capture sizes), capped at
/// `largest`. The attention's split is planned for the bucket, padding rows
/// included: with multiples of 32, b40 ran as 64 and unsplit where 40 splits
/// 4 ways (device run 257: the split rule past a wave never reached b33-b63).
int32_t batchBucket(int32_t n, int32_t largest) {
  int32_t bucket = 1;
  while (bucket < n && bucket < 8)
    bucket *= 2;
  if (bucket < n)
    bucket = (n + 7) / 8 * 8;
  return std::min(bucket, largest);
}

int32_t contextBucket(int32_t context) {
  int32_t bucket = 64;
  while (bucket < context)
    bucket *= 2;
  return bucket;
}

} // namespace

// Runs one decode step per (batch bucket, context bucket) up to
// max_num_seqs and max_seq_len, so every decode graph is captured, and every
// kernel and cuBLASLt algorithm it uses is loaded, before the first request:
// otherwise the first step at a new bucket pays for it. (Run 14: a
// Llama-3-8B batch-32 run took 38 ms beyond 127 x its median step; its one
// new graph is the suspected cause, to be measured with this option.) The
// rows write no cache slot and read page 0.
Status CudaExecutor::State::captureDecodeGraphs(int32_t max_seq_len, int32_t pages_per_seq) {
  if (graph_max_batch == 0)
    return Status::ok();
  std::vector<int32_t> buckets; // batchBucket's values
  for (int32_t n = 1; n < graph_max_batch; n = batchBucket(n + 1, graph_max_batch))
    buckets.push_back(n);
  buckets.push_back(graph_max_batch);
  for (int32_t n : buckets) {
    for (int32_t context = 64;; context *= 2) {
      int32_t length = std::min(context, max_seq_len);
      engine::Batch b;
      b.token_ids.assign(n, 0);
      b.positions.assign(n, length - 1);
      b.slot_mapping.assign(n, -1);
      b.query_start_offsets.resize(static_cast<size_t>(n) + 1);
      for (int32_t i = 0; i <= n; ++i)
        b.query_start_offsets[i] = i;
      b.context_lens.assign(n, length);
      b.max_pages_per_seq = pages_per_seq;
      b.block_tables.assign(static_cast<size_t>(n) * pages_per_seq, 0);
      for (int32_t i = 0; i < n; ++i) {
        b.logits_indices.push_back(i);
        b.request_ids.push_back(i);
      }
      Status status = runDecodeGraph(b);
      Status sync = cudaStatus(cudaStreamSynchronize(stream), path + ": capturing decode graphs");
      batch = nullptr;
      TXC_RETURN_IF_ERROR(withContext("the decode graph of batch " + std::to_string(n) +
                                          " and context " + std::to_string(length),
                                      status));
      TXC_RETURN_IF_ERROR(sync);
      if (length >= max_seq_len)
        break;
    }
  }
  return Status::ok();
}

bool CudaExecutor::State::graphable(const engine::Batch &b) const {
  return graph_max_batch > 0 && b.numTokens() == b.numSequences() &&
         b.numSequences() <= graph_max_batch;
}

// A decode step on a graph: the batch padded to its bucket (padding rows
// read page 0, write no cache slot and are never returned), the inputs
// copied to the fixed input buffer, then one graph launch. A graph is
// captured the first time its (batch, context) bucket is seen, by running
// the ordinary launch path under stream capture.
// A step queued ahead takes its token ids from the GPU: copied from
// `device_token_ids` after the upload, or with `token_ids_in_place` left as
// the argmax before it wrote them into the inputs (the upload skips them).
Status CudaExecutor::State::runDecodeGraph(const engine::Batch &b, const int32_t *device_token_ids,
                                           bool token_ids_in_place) {
  int32_t n = b.numSequences();
  int32_t bucket = batchBucket(n, graph_max_batch);
  int32_t stride = b.max_pages_per_seq;
  padded.token_ids.assign(b.token_ids.begin(), b.token_ids.end());
  padded.token_ids.resize(bucket, 0);
  padded.positions.assign(b.positions.begin(), b.positions.end());
  padded.positions.resize(bucket, 0);
  padded.slot_mapping.assign(b.slot_mapping.begin(), b.slot_mapping.end());
  padded.slot_mapping.resize(bucket, -1);
  padded.query_start_offsets.resize(static_cast<size_t>(bucket) + 1);
  for (int32_t i = 0; i <= bucket; ++i)
    padded.query_start_offsets[i] = i;
  padded.context_lens.assign(b.context_lens.begin(), b.context_lens.end());
  padded.context_lens.resize(bucket, 1);
  padded.block_tables.assign(b.block_tables.begin(), b.block_tables.end());
  padded.block_tables.resize(static_cast<size_t>(bucket) * stride, 0);
  padded.max_pages_per_seq = stride;
  TXC_RETURN_IF_ERROR(uploadInputs(padded, token_ids_in_place ? n : 0));
  if (device_token_ids && !token_ids_in_place)
    CU(cudaMemcpyAsync(const_cast<int32_t *>(d_tokens), device_token_ids,
                       static_cast<size_t>(n) * sizeof(int32_t), cudaMemcpyDeviceToDevice, stream),
       path + ": the token ids of a step queued ahead");

  int32_t context = contextBucket(max_context);
  auto key = std::make_pair(bucket, context);
  auto it = decode_graphs.find(key);
  if (it == decode_graphs.end()) {
    graph_context = context;
    // cuBLASLt times a shape only outside a capture, and a bucket's GEMM
    // shapes do not depend on the context: one uncaptured step per bucket.
    if (options.tune_gemms && gemm_tuned_buckets.insert(bucket).second) {
      Status status = enqueueLaunches(padded);
      Status sync = cudaStatus(cudaStreamSynchronize(stream), path + ": a step before capture");
      if (!status.isOk() || !sync.isOk())
        graph_context = 0;
      TXC_RETURN_IF_ERROR(
          withContext("the uncaptured step of batch " + std::to_string(bucket), status));
      TXC_RETURN_IF_ERROR(sync);
    }
    CU(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
       path + ": beginning the decode graph capture");
    Status captured = enqueueLaunches(padded);
    cudaGraph_t graph = nullptr;
    Status ended =
        cudaStatus(cudaStreamEndCapture(stream, &graph),
                   path + ": capturing the decode step of batch " + std::to_string(bucket));
    graph_context = 0;
    TXC_RETURN_IF_ERROR(captured);
    TXC_RETURN_IF_ERROR(ended);
    cudaGraphExec_t exec = nullptr;
    Status instantiated = cudaStatus(cudaGraphInstantiate(&exec, graph, 0),
                                     path + ": instantiating the decode graph");
    cudaGraphDestroy(graph);
    TXC_RETURN_IF_ERROR(instantiated);
    it = decode_graphs.emplace(key, exec).first;
    if (d_trace)
      graph_trace_labels[key] = trace_labels;
  }
  if (d_trace)
    step_trace_labels = graph_trace_labels[key];
  batch = &b;
  return cudaStatus(cudaGraphLaunch(it->second, stream), path + ": launching the decode graph");
}

// Runs one step; returns the logits rows (`logits`) or their argmax
// (`tokens`). The one host synchronisation is at the end, also after a
// failed launch, so nothing is left in flight on buffers the next step
// reuses.
Status CudaExecutor::State::step(const engine::Batch &b, float *logits, int32_t *tokens,
                                 const std::vector<engine::RowSampling> *sampling) {
  TXC_RETURN_IF_ERROR(validateBatch(b));
  int32_t n = b.numSequences();
  if (n > device_logits_rows)
    return outOfRange(path + ": batch of " + std::to_string(n) +
                      " sequences exceeds max_num_seqs " + std::to_string(device_logits_rows));
  if (lookaheadEligible(b, logits, tokens, sampling))
    return decodeStepAhead(b, *sampling, tokens);
  TXC_RETURN_IF_ERROR(drainLookahead());
  const bool traced = d_trace && b.numTokens() == n;
  if (traced)
    CU(cudaMemsetAsync(d_trace, 0, kMaxTracedLaunches * kTraceSlotsPerLaunch * sizeof(unsigned long long), stream),
       path + ": clearing the step trace");
  CU(cudaEventRecord(step_start, stream), path + ": event");
  Status status = Status::ok();
  if (graphable(b)) {
    status = runDecodeGraph(b);
  } else {
    status = uploadInputs(b);
    if (status.isOk())
      status = enqueueLaunches(b);
    step_trace_labels = trace_labels;
  }
  if (status.isOk() && logits)
    status =
        cudaStatus(cudaMemcpyAsync(logits, device_logits, static_cast<size_t>(n) * vocab_size * 4,
                                   cudaMemcpyDeviceToHost, stream),
                   path + ": copying the logits back");
  bool all_greedy = true;
  if (sampling) {
    if (sampling->size() != static_cast<size_t>(n))
      status = invalidArgument(path + ": " + std::to_string(sampling->size()) +
                               " sampling choices for " + std::to_string(n) + " sequences");
    all_greedy = std::all_of(sampling->begin(), sampling->end(), engine::isGreedy);
  }
  bool host_sampling_rows = tokens && !all_greedy && !options.device_sampling;
  if (status.isOk() && host_sampling_rows) {
    host_logits.resize(static_cast<size_t>(n) * vocab_size);
    status = cudaStatus(cudaMemcpyAsync(host_logits.data(), device_logits, host_logits.size() * 4,
                                        cudaMemcpyDeviceToHost, stream),
                        path + ": copying the logits back");
  } else if (status.isOk() && tokens) {
    status = enqueueDraw(n, sampling);
  }
  if (status.isOk() && tokens && !host_sampling_rows)
    status = cudaStatus(cudaMemcpyAsync(host_tokens, device_tokens, static_cast<size_t>(n) * 4,
                                        cudaMemcpyDeviceToHost, stream),
                        path + ": copying the sampled tokens back");
  cudaEventRecord(step_end, stream);
  Status sync = cudaStatus(cudaStreamSynchronize(stream), path + ": running the step on the GPU");
  batch = nullptr;
  TXC_RETURN_IF_ERROR(status);
  TXC_RETURN_IF_ERROR(sync);
  if (host_sampling_rows) {
    for (int32_t i = 0; i < n; ++i) {
      StatusOr<int32_t> token = engine::sampleTokenWithUniform(
          host_logits.data() + static_cast<size_t>(i) * vocab_size, vocab_size, (*sampling)[i]);
      tokens[i] = token.isOk() ? *token : -1;
    }
  } else if (tokens) {
    std::memcpy(tokens, host_tokens, static_cast<size_t>(n) * 4);
  }
  cudaEventElapsedTime(&last_step_ms, step_start, step_end);
  if (traced)
    TXC_RETURN_IF_ERROR(readTrace());
  if (profile) {
    bool decode = b.numTokens() == n;
    for (int i = 0; i < plan->launches_size(); ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, launch_events[i], launch_events[i + 1]);
      const std::string label = profileLabel(plan->launches(i));
      LaunchProfileEntry &entry = profile_totals[{label, decode}];
      entry.op = label;
      entry.decode = decode;
      entry.launches += 1;
      entry.total_ms += ms;
    }
  }
  return Status::ok();
}

Status CudaExecutor::execute(const engine::Batch &batch, float *logits) {
  return state_->step(batch, logits, nullptr);
}

Status CudaExecutor::executeSampled(const engine::Batch &batch,
                                    const std::vector<engine::RowSampling> &sampling,
                                    int32_t *tokens) {
  return state_->step(batch, nullptr, tokens, &sampling);
}

int32_t CudaExecutor::decodeGraphCount() const {
  return static_cast<int32_t>(state_->decode_graphs.size());
}

} // namespace txc::cuda
