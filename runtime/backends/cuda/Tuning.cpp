//===- Tuning.cpp - Decode attention set-up timed at startup --------------===//
//
// Which decode attention set-up is fastest at batch 1 differs between
// models in ways not yet explained (bench/RUNLOG.md, session 6: a group of
// 2 wants the rope folded in, the cluster merge and 4 splits at a 256-token
// context; a group of 4 wants none of those and 16 splits). With
// tune_decode_attention the step times each set-up the options leave open
// on its own batch-1 decode graph and keeps the fastest, the way TensorRT
// times its tactics at build time.
//
//===----------------------------------------------------------------------===//
// First, on its own: it settles the TXC_RETURN_IF_ERROR clash (see there).
#include "runtime/backends/cuda/ExecutorState.h"

#include <algorithm>

namespace txc::cuda {

namespace {

/// The context the set-ups are timed at: the model benchmarks' bucket (a
/// 128-token prompt and 128 new tokens), where the set-up matters most
/// (above ~1k tokens the split count fills the GPU whatever the floor).
constexpr int32_t kTuneContext = 256;
/// Rounds over all candidates (interleaved, so clock drift falls on each
/// alike) and graph replays per round and candidate.
constexpr int kTuneRounds = 7;
constexpr int kTuneReplays = 4;

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

Status CudaExecutor::State::tuneDecodeAttention(int32_t max_seq_len, int32_t pages_per_seq) {
  if (graph_max_batch == 0 || !decode_graphs.empty())
    return Status::ok(); // no graphs, or already captured with the rule's set-up
  const int32_t length = std::min(kTuneContext, max_seq_len);
  const int32_t pages = (length + page_size - 1) / page_size;
  if (pages > num_pages || pages > pages_per_seq)
    return Status::ok();
  // One sequence whose keys lie on distinct pages (page 0 for all of them
  // would keep the whole context in L2), writing no cache slot.
  engine::Batch b;
  b.token_ids = {0};
  b.positions = {length - 1};
  b.slot_mapping = {-1};
  b.query_start_offsets = {0, 1};
  b.context_lens = {length};
  b.max_pages_per_seq = pages_per_seq;
  b.block_tables.assign(pages_per_seq, 0);
  for (int32_t p = 0; p < pages; ++p)
    b.block_tables[p] = p;
  b.logits_indices = {0};
  b.request_ids = {0};

  const DecodeAttentionSetup rule = decode_attention;
  std::vector<bool> folds, clusters;
  if (options.rope_in_attention)
    folds = {*options.rope_in_attention};
  else if (fusable_ropes.empty())
    folds = {false};
  else
    folds = {false, true};
  clusters = options.attention_cluster_combine
                 ? std::vector<bool>{*options.attention_cluster_combine}
                 : std::vector<bool>{false, true};
  std::vector<int32_t> floors = options.decode_split_min_tokens > 0
                                    ? std::vector<int32_t>{options.decode_split_min_tokens}
                                    : std::vector<int32_t>{8, 16, 32, 64};
  std::vector<DecodeAttentionSetup> candidates;
  for (bool fold : folds)
    for (bool cluster : clusters)
      for (int32_t floor : floors)
        candidates.push_back({fold, cluster, floor, rule.warm_fold}); // the dry fold as the rule says
  if (candidates.size() < 2)
    return Status::ok();

  // One graph per candidate, captured through the ordinary path (which also
  // runs it once), then taken out of the cache.
  std::vector<cudaGraphExec_t> graphs;
  cudaEvent_t start = nullptr, stop = nullptr;
  auto release = [&] {
    for (cudaGraphExec_t g : graphs)
      cudaGraphExecDestroy(g);
    if (start)
      cudaEventDestroy(start);
    if (stop)
      cudaEventDestroy(stop);
    decode_attention = rule;
  };
  auto fail = [&](Status status) {
    release();
    return withContext("timing the decode attention set-ups", status);
  };
  for (const DecodeAttentionSetup &candidate : candidates) {
    decode_attention = candidate;
    Status status = runDecodeGraph(b);
    Status sync = cudaStatus(cudaStreamSynchronize(stream), path + ": a tuning step");
    batch = nullptr;
    if (!decode_graphs.empty()) {
      graphs.push_back(decode_graphs.begin()->second);
      decode_graphs.clear();
    }
    if (!status.isOk())
      return fail(status);
    if (!sync.isOk())
      return fail(sync);
  }
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess)
    return fail(internalError(path + ": creating the tuning events"));
  std::vector<std::vector<float>> times(candidates.size());
  for (int round = 0; round < kTuneRounds; ++round) {
    for (size_t c = 0; c < candidates.size(); ++c) {
      cudaEventRecord(start, stream);
      for (int r = 0; r < kTuneReplays; ++r)
        cudaGraphLaunch(graphs[c], stream);
      cudaEventRecord(stop, stream);
      Status sync = cudaStatus(cudaStreamSynchronize(stream), path + ": a tuning replay");
      if (!sync.isOk())
        return fail(sync);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      times[c].push_back(ms / kTuneReplays);
    }
  }
  size_t best = 0;
  std::vector<float> medians;
  for (size_t c = 0; c < candidates.size(); ++c) {
    medians.push_back(median(times[c]));
    if (medians[c] < medians[best])
      best = c;
  }
  // The rule stays unless a candidate beats it by more than the replays'
  // noise: on Qwen3-0.6B a set-up 0.1% faster at tuning was 2% slower in the
  // run (device run 30: 0.821 against 0.805 ms a step).
  // (The rule is always a candidate: it is one of the set-ups the options
  // leave open.)
  constexpr float kMargin = 0.01f;
  const size_t rule_index =
      static_cast<size_t>(std::find(candidates.begin(), candidates.end(), rule) - candidates.begin());
  if (rule_index < candidates.size() && medians[best] > medians[rule_index] * (1.0f - kMargin))
    best = rule_index;
  DecodeAttentionTuning &t = decode_attention_tuning;
  t.tuned = true;
  t.candidates = static_cast<int>(candidates.size());
  t.rule = rule;
  t.chosen = candidates[best];
  t.chosen_ms = medians[best];
  if (rule_index < candidates.size())
    t.rule_ms = medians[rule_index];
  release();
  decode_attention = candidates[best];
  return Status::ok();
}

DecodeAttentionSetup CudaExecutor::decodeAttention() const { return state_->decode_attention; }

DecodeAttentionTuning CudaExecutor::decodeAttentionTuning() const {
  return state_->decode_attention_tuning;
}

} // namespace txc::cuda
