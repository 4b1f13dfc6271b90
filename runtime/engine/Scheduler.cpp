//===- Scheduler.cpp - Forming each step's batch --------------------------===//
#include "txc/engine/Scheduler.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace txc::engine {
namespace {

bool olderFirst(const std::unique_ptr<Sequence> &a,
                const std::unique_ptr<Sequence> &b) {
  return a->id < b->id; // the engine hands out ids in arrival order
}

} // namespace

Status SchedulerConfig::validate() const {
  auto positive = [](const char *name, int64_t value) -> Status {
    if (value < 1)
      return invalidArgument(std::string(name) + " is " + std::to_string(value) +
                             "; it must be at least 1");
    return Status::ok();
  };
  TXC_RETURN_IF_ERROR(positive("max_batch_tokens", max_batch_tokens));
  TXC_RETURN_IF_ERROR(positive("max_num_seqs", max_num_seqs));
  TXC_RETURN_IF_ERROR(positive("max_seq_len", max_seq_len));
  TXC_RETURN_IF_ERROR(positive("page_size", page_size));
  TXC_RETURN_IF_ERROR(positive("num_pages", num_pages));
  // Slots (page * page_size + offset) travel as int32 in every batch's slot
  // mapping and in the kernels that read it.
  if (int64_t{num_pages} * page_size > INT32_MAX)
    return invalidArgument("a KV cache of " + std::to_string(num_pages) + " pages of " +
                           std::to_string(page_size) + " tokens has " +
                           std::to_string(int64_t{num_pages} * page_size) +
                           " slots, over the 2147483647 a 32-bit slot mapping holds");
  if (!chunked_prefill && max_batch_tokens < max_seq_len)
    return invalidArgument("max_batch_tokens " + std::to_string(max_batch_tokens) +
                           " is below max_seq_len " + std::to_string(max_seq_len) +
                           "; long prompts need chunked prefill");
  return Status::ok();
}

Scheduler::Scheduler(const SchedulerConfig &config)
    : config_(config), pages_(config.num_pages, config.page_size) {}

Status Scheduler::admissible(const std::vector<int32_t> &prompt_ids,
                             const SamplingParams &sampling) const {
  int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
  if (prompt_len == 0)
    return invalidArgument("the prompt is empty; it needs at least one token");
  if (prompt_len >= config_.max_seq_len)
    return outOfRange("prompt of " + std::to_string(prompt_len) +
                      " tokens leaves no room to generate under max_seq_len " +
                      std::to_string(config_.max_seq_len));
  // The last generated token is returned, never fed back, so its K and V
  // never need a slot.
  int64_t total = std::min<int64_t>(prompt_len + sampling.max_new_tokens,
                                    config_.max_seq_len);
  int32_t pages_needed = pages_.pagesFor(total - 1);
  if (pages_needed > config_.num_pages)
    return resourceExhausted(
        "request of " + std::to_string(prompt_len) + " prompt + " +
        std::to_string(sampling.max_new_tokens) + " new tokens needs " +
        std::to_string(pages_needed) + " KV pages of " +
        std::to_string(config_.page_size) + " tokens; the cache has " +
        std::to_string(config_.num_pages));
  return Status::ok();
}

void Scheduler::add(std::unique_ptr<Sequence> sequence) {
  waiting_.push_back(std::move(sequence));
}

Sequence *Scheduler::preemptYoungest(const std::vector<Sequence *> &in_this_step) {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    Sequence *victim = it->get();
    if (std::find(in_this_step.begin(), in_this_step.end(), victim) !=
        in_this_step.end())
      continue;
    pages_.release(victim->id);
    victim->num_computed = 0;
    std::unique_ptr<Sequence> owned = std::move(*it);
    running_.erase(std::next(it).base());
    // Admission is first come first served, so every request that never
    // ran is younger than every preempted one: keeping the queue sorted by
    // id puts the preempted first, oldest first.
    waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), owned,
                                     olderFirst),
                    std::move(owned));
    ++stats_.preemptions;
    return victim;
  }
  return nullptr;
}

void Scheduler::appendToBatch(ScheduledBatch &scheduled, Sequence *sequence,
                              int32_t new_tokens) {
  Batch &batch = scheduled.batch;
  int32_t start = sequence->num_computed;
  int32_t end = start + new_tokens;
  for (int32_t position = start; position < end; ++position) {
    batch.token_ids.push_back(sequence->tokens[position]);
    batch.positions.push_back(position);
    batch.slot_mapping.push_back(pages_.slotOf(sequence->id, position));
  }
  batch.query_start_offsets.push_back(batch.numTokens());
  batch.context_lens.push_back(end);
  const std::vector<int32_t> &table = pages_.blockTable(sequence->id);
  batch.block_tables.insert(batch.block_tables.end(), table.begin(), table.end());
  batch.block_tables.insert(batch.block_tables.end(),
                            batch.max_pages_per_seq - table.size(), -1);
  batch.logits_indices.push_back(batch.numTokens() - 1);
  batch.request_ids.push_back(sequence->id);
  bool decoding = new_tokens == 1 && start >= sequence->prompt_len;
  if (!decoding)
    batch.num_prefill_tokens += new_tokens;

  scheduled.sequences.push_back(sequence);
  scheduled.num_new_tokens.push_back(new_tokens);
  scheduled.samples_token.push_back(end == static_cast<int32_t>(sequence->tokens.size()));
}

ScheduledBatch Scheduler::schedule() {
  ScheduledBatch scheduled;
  scheduled.batch.max_pages_per_seq = pages_.pagesFor(config_.max_seq_len);
  scheduled.batch.query_start_offsets.push_back(0);
  int32_t token_budget = config_.max_batch_tokens;
  auto full = [&] {
    return token_budget == 0 ||
           static_cast<int32_t>(scheduled.sequences.size()) == config_.max_num_seqs;
  };
  bool preempted = false;

  // 1. Running sequences, oldest first: decodes and unfinished prefills.
  std::vector<Sequence *> running_order;
  for (const std::unique_ptr<Sequence> &sequence : running_)
    running_order.push_back(sequence.get());
  for (Sequence *sequence : running_order) {
    if (full())
      break;
    if (!isRunning(sequence))
      continue; // preempted for an older sequence earlier in this loop
    int32_t remaining =
        static_cast<int32_t>(sequence->tokens.size()) - sequence->num_computed;
    int32_t new_tokens = std::min(remaining, token_budget);
    if (new_tokens < remaining && !config_.chunked_prefill)
      continue;
    // Not enough pages: evict the youngest sequence not yet in this step.
    // Sequences are visited oldest first, so that is a younger one, or,
    // when none is left, this sequence itself.
    bool fits = true;
    while (pages_.pagesNeededToAppend(sequence->id, new_tokens) >
           pages_.numFreePages()) {
      Sequence *victim = preemptYoungest(scheduled.sequences);
      preempted = preempted || victim != nullptr;
      if (victim == nullptr || victim == sequence) {
        fits = false;
        break;
      }
    }
    if (!fits)
      continue;
    Status reserved = pages_.append(sequence->id, new_tokens);
    (void)reserved; // cannot fail: the pages were counted above
    appendToBatch(scheduled, sequence, new_tokens);
    token_budget -= new_tokens;
  }

  // 2. Admit waiting requests in order, unless this step had to preempt
  // (re-admitting what was just evicted would only thrash).
  while (!preempted && !waiting_.empty() && !full()) {
    Sequence *sequence = waiting_.front().get();
    int32_t remaining =
        static_cast<int32_t>(sequence->tokens.size()) - sequence->num_computed;
    int32_t new_tokens = std::min(remaining, token_budget);
    if (new_tokens < remaining && !config_.chunked_prefill)
      break;
    if (pages_.pagesNeededToAppend(sequence->id, new_tokens) > pages_.numFreePages())
      break;
    Status reserved = pages_.append(sequence->id, new_tokens);
    (void)reserved; // cannot fail: the pages were counted above
    std::unique_ptr<Sequence> owned = std::move(waiting_.front());
    waiting_.pop_front();
    running_.insert(std::upper_bound(running_.begin(), running_.end(), owned,
                                     olderFirst),
                    std::move(owned));
    appendToBatch(scheduled, sequence, new_tokens);
    token_budget -= new_tokens;
  }

  if (config_.reserve_next_page && waiting_.empty())
    reserveNextPages(scheduled);

  if (!scheduled.empty()) {
    const Batch &batch = scheduled.batch;
    ++stats_.steps;
    stats_.max_sequences_in_a_step =
        std::max(stats_.max_sequences_in_a_step, batch.numSequences());
    stats_.max_tokens_in_a_step = std::max(stats_.max_tokens_in_a_step, batch.numTokens());
    if (batch.num_prefill_tokens > 0 && batch.num_prefill_tokens < batch.numTokens())
      ++stats_.mixed_steps;
  }
  return scheduled;
}

// SchedulerConfig::reserve_next_page: each row that samples a token and goes
// on (neither its last new token nor max_seq_len) gets the page its next
// position opens now, in the allocator and in this batch's block table.
void Scheduler::reserveNextPages(ScheduledBatch &scheduled) {
  Batch &batch = scheduled.batch;
  const size_t stride = static_cast<size_t>(batch.max_pages_per_seq);
  for (size_t i = 0; i < scheduled.sequences.size(); ++i) {
    const Sequence &sequence = *scheduled.sequences[i];
    if (!scheduled.samples_token[i] || !goesOn(sequence) ||
        pages_.pagesNeededToAppend(sequence.id, 1) == 0 ||
        pages_.numFreePages() == 0)
      continue;
    if (!pages_.reservePages(sequence.id, 1).isOk())
      continue;
    const std::vector<int32_t> &table = pages_.blockTable(sequence.id);
    if (table.size() <= stride)
      batch.block_tables[i * stride + table.size() - 1] = table.back();
  }
}

bool Scheduler::goesOn(const Sequence &sequence) const {
  return sequence.numGenerated() + 1 < sequence.sampling.max_new_tokens &&
         static_cast<int32_t>(sequence.tokens.size()) + 1 < config_.max_seq_len;
}

bool Scheduler::isRunning(const Sequence *sequence) const {
  return std::any_of(running_.begin(), running_.end(),
                     [&](const std::unique_ptr<Sequence> &s) {
                       return s.get() == sequence;
                     });
}

void Scheduler::markComputed(const ScheduledBatch &scheduled) {
  for (size_t i = 0; i < scheduled.sequences.size(); ++i)
    scheduled.sequences[i]->num_computed += scheduled.num_new_tokens[i];
}

void Scheduler::finish(Sequence *sequence) {
  pages_.release(sequence->id);
  auto running = std::find_if(running_.begin(), running_.end(),
                              [&](const std::unique_ptr<Sequence> &s) {
                                return s.get() == sequence;
                              });
  if (running != running_.end()) {
    running_.erase(running);
    return;
  }
  auto waiting = std::find_if(waiting_.begin(), waiting_.end(),
                              [&](const std::unique_ptr<Sequence> &s) {
                                return s.get() == sequence;
                              });
  if (waiting != waiting_.end())
    waiting_.erase(waiting);
}

std::vector<Sequence *> Scheduler::allSequences() const {
  std::vector<Sequence *> all;
  for (const std::unique_ptr<Sequence> &sequence : running_)
    all.push_back(sequence.get());
  for (const std::unique_ptr<Sequence> &sequence : waiting_)
    all.push_back(sequence.get());
  return all;
}

} // namespace txc::engine
