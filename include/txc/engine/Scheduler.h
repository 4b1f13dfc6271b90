//===- Scheduler.h - Forming each step's batch -----------------*- C++ -*-===//
//
// Continuous batching kept simple: every step the scheduler
//   1. gives each running sequence its next tokens, oldest first: one token
//      for a decode, the next chunk for a prompt still prefilling;
//   2. admits waiting requests first come first served while the token
//      budget (max_batch_tokens), the sequence budget (max_num_seqs) and
//      free KV pages last, prefilling long prompts in chunks;
//   3. when a running sequence cannot get a page, preempts the youngest
//      running sequence: its pages are freed and it goes back to the front
//      of the queue to be recomputed from its tokens so far (vLLM's
//      recompute preemption). Recompute reproduces the same tokens because
//      sampling is counter-based.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ENGINE_SCHEDULER_H
#define TXC_ENGINE_SCHEDULER_H

#include "txc/engine/Batch.h"
#include "txc/engine/KvPageAllocator.h"

#include <deque>
#include <memory>
#include <vector>

namespace txc::engine {

struct SchedulerConfig {
  /// Tokens per step across all sequences (the arena is sized for it).
  int32_t max_batch_tokens = 2048;
  /// Sequences per step.
  int32_t max_num_seqs = 256;
  /// Longest sequence, prompt and output together.
  int32_t max_seq_len = 4096;
  /// Tokens per KV page, and pages in the cache.
  int32_t page_size = 16;
  int32_t num_pages = 1024;
  /// Split prompts longer than the remaining token budget across steps.
  bool chunked_prefill = true;
  /// A row that samples a token and goes on holds the page of its next
  /// position a step early, while no request waits: a backend that queues
  /// the next decode step before this one's tokens are back (the CUDA
  /// backend's decode lookahead) finds that step's slots in the tables it
  /// has. Never more pages than the request needs (its last position's).
  bool reserve_next_page = false;

  Status validate() const;
};

/// A request as the scheduler tracks it.
struct Sequence {
  RequestId id = -1;
  /// Prompt, then generated tokens.
  std::vector<int32_t> tokens;
  int32_t prompt_len = 0;
  /// Tokens whose K and V are in the cache.
  int32_t num_computed = 0;
  SamplingParams sampling;
  TokenCallback on_token;
  FinishReason finish_reason = FinishReason::kNone;

  int32_t numGenerated() const {
    return static_cast<int32_t>(tokens.size()) - prompt_len;
  }
};

struct ScheduledBatch {
  Batch batch;
  /// Parallel to the batch's sequences.
  std::vector<Sequence *> sequences;
  std::vector<int32_t> num_new_tokens;
  /// False for a prompt chunk that is not the prompt's last: its logits are
  /// not sampled.
  std::vector<bool> samples_token;

  bool empty() const { return sequences.empty(); }
};

struct SchedulerStats {
  int64_t steps = 0;
  int64_t preemptions = 0;
  int32_t max_sequences_in_a_step = 0;
  int32_t max_tokens_in_a_step = 0;
  /// Steps that mixed prefill and decode tokens.
  int64_t mixed_steps = 0;
};

class Scheduler {
public:
  explicit Scheduler(const SchedulerConfig &config);

  const SchedulerConfig &config() const { return config_; }
  const KvPageAllocator &pages() const { return pages_; }
  const SchedulerStats &stats() const { return stats_; }

  /// Checks the request fits the engine at all (length, pages), so an
  /// accepted request always runs to completion eventually.
  Status admissible(const std::vector<int32_t> &prompt_ids,
                    const SamplingParams &sampling) const;
  void add(std::unique_ptr<Sequence> sequence);

  /// The next step's batch; empty when nothing is waiting or running.
  ScheduledBatch schedule();
  /// After the step ran: marks the scheduled tokens computed.
  void markComputed(const ScheduledBatch &scheduled);
  /// Removes a finished sequence and frees its pages.
  void finish(Sequence *sequence);
  /// Every sequence, running or waiting (for error cleanup).
  std::vector<Sequence *> allSequences() const;

  /// Whether `sequence`, drawing a token this step, is scheduled again after
  /// it unless that token stops it: neither its last new token nor at
  /// max_seq_len.
  bool goesOn(const Sequence &sequence) const;

  size_t numWaiting() const { return waiting_.size(); }
  size_t numRunning() const { return running_.size(); }
  bool idle() const { return waiting_.empty() && running_.empty(); }

private:
  // Frees the youngest running sequence not already in this step and
  // requeues it for recompute; nullptr when every running one is in it.
  Sequence *preemptYoungest(const std::vector<Sequence *> &in_this_step);
  bool isRunning(const Sequence *sequence) const;
  void reserveNextPages(ScheduledBatch &scheduled);
  void appendToBatch(ScheduledBatch &scheduled, Sequence *sequence,
                     int32_t new_tokens);

  SchedulerConfig config_;
  KvPageAllocator pages_;
  SchedulerStats stats_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  // In arrival order, so "youngest" is back().
  std::vector<std::unique_ptr<Sequence>> running_;
};

} // namespace txc::engine

#endif // TXC_ENGINE_SCHEDULER_H
