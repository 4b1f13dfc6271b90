//===- SchedulerTest.cpp - The ragged batch, chunking, budgets ------------===//
#include "txc/engine/Scheduler.h"

#include <gtest/gtest.h>

namespace txc::engine {
namespace {

std::unique_ptr<Sequence> makeSequence(RequestId id, int32_t prompt_len,
                                       int32_t max_new_tokens = 8) {
  auto sequence = std::make_unique<Sequence>();
  sequence->id = id;
  for (int32_t i = 0; i < prompt_len; ++i)
    sequence->tokens.push_back(100 + 10 * static_cast<int32_t>(id) + i);
  sequence->prompt_len = prompt_len;
  sequence->sampling.max_new_tokens = max_new_tokens;
  return sequence;
}

SchedulerConfig smallConfig() {
  SchedulerConfig config;
  config.max_batch_tokens = 64;
  config.max_num_seqs = 8;
  config.max_seq_len = 32;
  config.page_size = 4;
  config.num_pages = 32;
  return config;
}

// What the engine does after a step: mark computed, append a token to the
// sequences that sampled.
void completeStep(Scheduler &scheduler, const ScheduledBatch &scheduled) {
  scheduler.markComputed(scheduled);
  for (size_t i = 0; i < scheduled.sequences.size(); ++i)
    if (scheduled.samples_token[i])
      scheduled.sequences[i]->tokens.push_back(7);
}

TEST(SchedulerTest, PrefillsFormOneRaggedBatch) {
  Scheduler scheduler(smallConfig());
  scheduler.add(makeSequence(0, 5));
  scheduler.add(makeSequence(1, 3));
  ScheduledBatch scheduled = scheduler.schedule();
  const Batch &batch = scheduled.batch;
  EXPECT_EQ(batch.token_ids, (std::vector<int32_t>{100, 101, 102, 103, 104, 110, 111, 112}));
  EXPECT_EQ(batch.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 1, 2}));
  EXPECT_EQ(batch.query_start_offsets, (std::vector<int32_t>{0, 5, 8}));
  EXPECT_EQ(batch.context_lens, (std::vector<int32_t>{5, 3}));
  EXPECT_EQ(batch.logits_indices, (std::vector<int32_t>{4, 7}));
  EXPECT_EQ(batch.request_ids, (std::vector<RequestId>{0, 1}));
  EXPECT_EQ(batch.max_pages_per_seq, 8); // 32 tokens / 4
  std::vector<int32_t> expected_tables(16, -1);
  expected_tables[0] = 0;
  expected_tables[1] = 1;
  expected_tables[8] = 2;
  EXPECT_EQ(batch.block_tables, expected_tables);
  EXPECT_EQ(batch.slot_mapping, (std::vector<int32_t>{0, 1, 2, 3, 4, 8, 9, 10}));
  EXPECT_EQ(batch.num_prefill_tokens, 8);
  EXPECT_EQ(scheduled.samples_token, (std::vector<bool>{true, true}));

  completeStep(scheduler, scheduled);
  ScheduledBatch decode = scheduler.schedule();
  EXPECT_EQ(decode.batch.token_ids, (std::vector<int32_t>{7, 7}));
  EXPECT_EQ(decode.batch.positions, (std::vector<int32_t>{5, 3}));
  EXPECT_EQ(decode.batch.context_lens, (std::vector<int32_t>{6, 4}));
  EXPECT_EQ(decode.batch.slot_mapping, (std::vector<int32_t>{5, 11}));
  EXPECT_EQ(decode.batch.num_prefill_tokens, 0);
}

TEST(SchedulerTest, LongPromptsPrefillInChunksWithinTheTokenBudget) {
  SchedulerConfig config = smallConfig();
  config.max_batch_tokens = 4;
  Scheduler scheduler(config);
  scheduler.add(makeSequence(0, 10));
  std::vector<int32_t> chunk_sizes;
  std::vector<bool> sampled;
  for (int step = 0; step < 3; ++step) {
    ScheduledBatch scheduled = scheduler.schedule();
    ASSERT_EQ(scheduled.sequences.size(), 1u);
    EXPECT_LE(scheduled.batch.numTokens(), 4);
    chunk_sizes.push_back(scheduled.batch.numTokens());
    sampled.push_back(scheduled.samples_token[0]);
    EXPECT_EQ(scheduled.batch.positions.front(), 4 * step);
    completeStep(scheduler, scheduled);
  }
  EXPECT_EQ(chunk_sizes, (std::vector<int32_t>{4, 4, 2}));
  EXPECT_EQ(sampled, (std::vector<bool>{false, false, true}));
}

TEST(SchedulerTest, DecodesShareTheBudgetWithAPrefillChunk) {
  SchedulerConfig config = smallConfig();
  config.max_batch_tokens = 6;
  Scheduler scheduler(config);
  scheduler.add(makeSequence(0, 2));
  completeStep(scheduler, scheduler.schedule()); // 0 now decodes
  scheduler.add(makeSequence(1, 12));
  ScheduledBatch mixed = scheduler.schedule();
  EXPECT_EQ(mixed.batch.numTokens(), 6);
  EXPECT_EQ(mixed.num_new_tokens, (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(mixed.batch.num_prefill_tokens, 5);
  EXPECT_EQ(scheduler.stats().mixed_steps, 1);
}

TEST(SchedulerTest, HonoursMaxNumSeqs) {
  SchedulerConfig config = smallConfig();
  config.max_num_seqs = 2;
  Scheduler scheduler(config);
  for (RequestId id = 0; id < 3; ++id)
    scheduler.add(makeSequence(id, 2));
  ScheduledBatch scheduled = scheduler.schedule();
  EXPECT_EQ(scheduled.batch.request_ids, (std::vector<RequestId>{0, 1}));
  EXPECT_EQ(scheduler.numWaiting(), 1u);
}

TEST(SchedulerTest, WaitsForPagesInsteadOfOvercommitting) {
  SchedulerConfig config = smallConfig();
  config.num_pages = 3;
  Scheduler scheduler(config);
  scheduler.add(makeSequence(0, 8)); // 2 pages
  scheduler.add(makeSequence(1, 8)); // 2 more: only 1 left
  ScheduledBatch scheduled = scheduler.schedule();
  EXPECT_EQ(scheduled.batch.request_ids, (std::vector<RequestId>{0}));
  EXPECT_EQ(scheduler.pages().numFreePages(), 1);
  scheduler.finish(scheduled.sequences[0]);
  EXPECT_EQ(scheduler.schedule().batch.request_ids, (std::vector<RequestId>{1}));
}

TEST(SchedulerTest, PreemptsTheYoungestWhenADecodeNeedsAPage) {
  SchedulerConfig config = smallConfig();
  config.num_pages = 4;
  Scheduler scheduler(config);
  scheduler.add(makeSequence(0, 8)); // exactly 2 full pages
  scheduler.add(makeSequence(1, 8));
  completeStep(scheduler, scheduler.schedule());
  EXPECT_EQ(scheduler.pages().numFreePages(), 0);
  // Both now need a 3rd page for their decode; 0 is older and wins.
  ScheduledBatch scheduled = scheduler.schedule();
  EXPECT_EQ(scheduled.batch.request_ids, (std::vector<RequestId>{0}));
  EXPECT_EQ(scheduler.stats().preemptions, 1);
  EXPECT_EQ(scheduler.numWaiting(), 1u);
  // The preempted one is recomputed from all its tokens, prompt and output.
  scheduler.finish(scheduled.sequences[0]);
  ScheduledBatch recompute = scheduler.schedule();
  EXPECT_EQ(recompute.batch.request_ids, (std::vector<RequestId>{1}));
  EXPECT_EQ(recompute.batch.numTokens(), 9);
  EXPECT_EQ(recompute.batch.token_ids.back(), 7);
}

TEST(SchedulerTest, RejectsRequestsThatCanNeverRun) {
  SchedulerConfig config = smallConfig();
  config.num_pages = 2; // 8 tokens of KV
  Scheduler scheduler(config);
  SamplingParams sampling;
  sampling.max_new_tokens = 4;
  EXPECT_EQ(scheduler.admissible({}, sampling).message(),
            "the prompt is empty; it needs at least one token");
  EXPECT_EQ(scheduler.admissible(std::vector<int32_t>(32, 1), sampling).message(),
            "prompt of 32 tokens leaves no room to generate under max_seq_len 32");
  Status too_big = scheduler.admissible(std::vector<int32_t>(6, 1), sampling);
  EXPECT_EQ(too_big.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(too_big.message(), "request of 6 prompt + 4 new tokens needs 3 KV "
                               "pages of 4 tokens; the cache has 2");
  // 5 + 4 tokens, the last never cached: exactly 8 slots.
  EXPECT_TRUE(scheduler.admissible(std::vector<int32_t>(5, 1), sampling).isOk());
}

// reserve_next_page: a decode row whose next position opens a page holds it
// a step early (in the allocator and in the batch's table), and the next
// step writes into it without taking another; nothing is reserved for a
// row's last token, nor while a request waits for pages.
TEST(SchedulerTest, ReservesTheNextPageAStepEarly) {
  SchedulerConfig config = smallConfig();
  config.reserve_next_page = true;
  Scheduler scheduler(config);
  scheduler.add(makeSequence(0, 2, /*max_new_tokens=*/4));
  ScheduledBatch prefill = scheduler.schedule(); // positions 0-1 in page 0
  ASSERT_EQ(scheduler.pages().numFreePages(), 31);
  completeStep(scheduler, prefill);
  ScheduledBatch first = scheduler.schedule(); // position 2; 3 is in page 0 too
  EXPECT_EQ(first.batch.slot_mapping, (std::vector<int32_t>{2}));
  EXPECT_EQ(scheduler.pages().numFreePages(), 31);
  completeStep(scheduler, first);
  ScheduledBatch second = scheduler.schedule(); // position 3; 4 opens page 1
  EXPECT_EQ(second.batch.slot_mapping, (std::vector<int32_t>{3}));
  EXPECT_EQ(scheduler.pages().numFreePages(), 30);
  EXPECT_EQ(second.batch.block_tables[0], 0);
  EXPECT_EQ(second.batch.block_tables[1], 1) << "page 1 is in the table a step early";
  completeStep(scheduler, second);
  ScheduledBatch third = scheduler.schedule(); // position 4: the reserved page
  EXPECT_EQ(third.batch.slot_mapping, (std::vector<int32_t>{4}));
  EXPECT_EQ(scheduler.pages().numFreePages(), 30);
  EXPECT_EQ(third.batch.block_tables[1], 1);

  // 2 new tokens: the decode step samples the last, so page 1 (position 4's)
  // is not taken; without the option no page is taken before its position.
  Scheduler last(config);
  last.add(makeSequence(0, 3, /*max_new_tokens=*/2));
  ScheduledBatch last_prefill = last.schedule(); // positions 0-2
  completeStep(last, last_prefill);
  ScheduledBatch last_decode = last.schedule(); // position 3 samples the last token
  EXPECT_EQ(last_decode.batch.block_tables[1], -1);
  EXPECT_EQ(last.pages().numFreePages(), 31);

  SchedulerConfig plain_config = smallConfig();
  Scheduler plain(plain_config);
  plain.add(makeSequence(0, 3, 8));
  ScheduledBatch plain_prefill = plain.schedule();
  completeStep(plain, plain_prefill);
  ScheduledBatch plain_decode = plain.schedule(); // position 3; 4 opens page 1
  EXPECT_EQ(plain_decode.batch.block_tables[1], -1);
  EXPECT_EQ(plain.pages().numFreePages(), 31);

  // A request waiting (one sequence at a time, max_num_seqs 1): none reserved.
  SchedulerConfig one_at_a_time = config;
  one_at_a_time.max_num_seqs = 1;
  Scheduler busy(one_at_a_time);
  busy.add(makeSequence(0, 3, 8));
  busy.add(makeSequence(1, 3, 8));
  ScheduledBatch busy_prefill = busy.schedule();
  completeStep(busy, busy_prefill);
  ScheduledBatch busy_decode = busy.schedule(); // position 3 of sequence 0
  ASSERT_EQ(busy_decode.batch.request_ids, (std::vector<RequestId>{0}));
  EXPECT_EQ(busy_decode.batch.block_tables[1], -1);
}

TEST(SchedulerTest, ConfigValidationNamesTheField) {
  SchedulerConfig config = smallConfig();
  config.page_size = 0;
  EXPECT_EQ(config.validate().message(), "page_size is 0; it must be at least 1");
  config = smallConfig();
  config.chunked_prefill = false;
  config.max_batch_tokens = 16;
  EXPECT_EQ(config.validate().message(),
            "max_batch_tokens 16 is below max_seq_len 32; long prompts need "
            "chunked prefill");
  config = smallConfig();
  config.num_pages = 1 << 27;
  config.page_size = 16; // 2^31 slots: one past the int32 slot mapping
  EXPECT_EQ(config.validate().message(),
            "a KV cache of 134217728 pages of 16 tokens has 2147483648 slots, over the "
            "2147483647 a 32-bit slot mapping holds");
  config.num_pages = (1 << 27) - 1;
  EXPECT_TRUE(config.validate().isOk()) << config.validate().message();
}

} // namespace
} // namespace txc::engine
