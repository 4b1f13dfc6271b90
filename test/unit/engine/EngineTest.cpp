//===- EngineTest.cpp - Batched equals alone, streaming, stopping ---------===//
#include "FakeExecutor.h"

#include "txc/engine/Engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace txc::engine {
namespace {

using testing::FakeExecutor;

constexpr int32_t kVocab = 50;

SchedulerConfig generousConfig() {
  SchedulerConfig config;
  config.max_batch_tokens = 256;
  config.max_num_seqs = 16;
  config.max_seq_len = 128;
  config.page_size = 4;
  config.num_pages = 256;
  return config;
}

// Six requests of different lengths, greedy and sampled, no EOS.
std::vector<Request> mixedRequests() {
  std::vector<Request> requests;
  int32_t prompt_lengths[] = {1, 7, 23, 4, 40, 12};
  int32_t new_tokens[] = {9, 5, 12, 17, 6, 10};
  for (int i = 0; i < 6; ++i) {
    Request request;
    for (int32_t t = 0; t < prompt_lengths[i]; ++t)
      request.prompt_ids.push_back((7 * i + 3 * t + 1) % kVocab);
    request.sampling.max_new_tokens = new_tokens[i];
    if (i % 2 == 1) {
      request.sampling.temperature = 0.8f;
      request.sampling.top_k = 20;
      request.sampling.top_p = 0.9f;
      request.sampling.seed = 1000 + i;
    }
    requests.push_back(request);
  }
  return requests;
}

struct EngineRun {
  std::vector<RequestResult> results;
  SchedulerStats stats;
  std::vector<Batch> batches;
};

EngineRun runTogether(const std::vector<Request> &requests, const SchedulerConfig &config,
                std::vector<int32_t> eos = {}) {
  FakeExecutor executor(kVocab, config.num_pages, config.page_size);
  auto engine = Engine::create(executor, EngineConfig{config, std::move(eos)});
  EXPECT_TRUE(engine.isOk()) << engine.status().toString();
  auto results = (*engine)->generate(requests);
  EXPECT_TRUE(results.isOk()) << results.status().toString();
  EXPECT_TRUE((*engine)->idle());
  EXPECT_EQ((*engine)->scheduler().pages().numFreePages(), config.num_pages)
      << "every page returns when every request is done";
  return {results.isOk() ? *results : std::vector<RequestResult>{},
          (*engine)->stats(), executor.batches()};
}

std::vector<std::vector<int32_t>> outputsAlone(const std::vector<Request> &requests,
                                               std::vector<int32_t> eos = {}) {
  std::vector<std::vector<int32_t>> outputs;
  for (const Request &request : requests) {
    EngineRun alone = runTogether({request}, generousConfig(), eos);
    EXPECT_EQ(alone.stats.max_sequences_in_a_step, 1);
    outputs.push_back(alone.results.at(0).output_ids);
  }
  return outputs;
}

std::vector<std::vector<int32_t>> outputsOf(const EngineRun &run) {
  std::vector<std::vector<int32_t>> outputs;
  for (const RequestResult &result : run.results)
    outputs.push_back(result.output_ids);
  return outputs;
}

TEST(EngineTest, BatchedRequestsMatchEachRunAlone) {
  std::vector<Request> requests = mixedRequests();
  auto alone = outputsAlone(requests);
  EngineRun together = runTogether(requests, generousConfig());
  EXPECT_EQ(outputsOf(together), alone);
  EXPECT_EQ(together.stats.max_sequences_in_a_step, 6) << "all six in one batch";
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(together.results[i].output_ids.size(),
              size_t(requests[i].sampling.max_new_tokens));
    EXPECT_EQ(together.results[i].finish_reason, FinishReason::kLength);
  }
}

TEST(EngineTest, StaggeredArrivalsMatchEachRunAlone) {
  // Requests join while others decode: continuous batching.
  std::vector<Request> requests = mixedRequests();
  auto alone = outputsAlone(requests);
  SchedulerConfig config = generousConfig();
  FakeExecutor executor(kVocab, config.num_pages, config.page_size);
  auto engine = Engine::create(executor, EngineConfig{config, {}});
  ASSERT_TRUE(engine.isOk());
  std::vector<std::vector<int32_t>> outputs(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto id = (*engine)->submit(requests[i], [&outputs, i](const TokenEvent &event) {
      outputs[i].push_back(event.token);
    });
    ASSERT_TRUE(id.isOk());
    ASSERT_TRUE((*engine)->step().isOk());
    ASSERT_TRUE((*engine)->step().isOk());
  }
  ASSERT_TRUE((*engine)->runUntilIdle().isOk());
  EXPECT_EQ(outputs, alone);
  EXPECT_GT((*engine)->stats().mixed_steps, 0);
}

TEST(EngineTest, ChunkedPrefillUnderASmallTokenBudgetMatchesAlone) {
  std::vector<Request> requests = mixedRequests();
  SchedulerConfig config = generousConfig();
  config.max_batch_tokens = 8;
  EngineRun together = runTogether(requests, config);
  EXPECT_EQ(outputsOf(together), outputsAlone(requests));
  for (const Batch &batch : together.batches)
    EXPECT_LE(batch.numTokens(), 8);
  EXPECT_EQ(together.stats.max_tokens_in_a_step, 8);
}

TEST(EngineTest, PreemptionUnderATightPageBudgetMatchesAlone) {
  std::vector<Request> requests = mixedRequests();
  SchedulerConfig config = generousConfig();
  config.num_pages = 14; // 56 slots; the longest request alone needs 12 pages
  EngineRun together = runTogether(requests, config);
  EXPECT_EQ(outputsOf(together), outputsAlone(requests));
  EXPECT_GT(together.stats.preemptions, 0);
  EXPECT_GT(together.stats.max_sequences_in_a_step, 1);
}

// reserve_next_page (what the CUDA decode lookahead asks of the scheduler):
// the same outputs as each request alone and every page back at the end,
// with pages to spare (some step's table then holds a page past its
// context), under a tight page budget (preemption) and with requests
// waiting (few sequences a step).
TEST(EngineTest, ReservingTheNextPageMatchesAloneAndFreesEveryPage) {
  std::vector<Request> requests = mixedRequests();
  const auto alone = outputsAlone(requests);
  SchedulerConfig spare = generousConfig(), tight = generousConfig(), busy = generousConfig();
  tight.num_pages = 14;
  busy.max_num_seqs = 2;
  busy.max_batch_tokens = 16;
  for (SchedulerConfig *config : {&spare, &tight, &busy})
    config->reserve_next_page = true;

  EngineRun with_spare = runTogether(requests, spare);
  EXPECT_EQ(outputsOf(with_spare), alone);
  int ahead = 0;
  for (const Batch &batch : with_spare.batches)
    for (int32_t i = 0; i < batch.numSequences(); ++i) {
      int32_t held = 0;
      for (int32_t p = 0; p < batch.max_pages_per_seq; ++p)
        held += batch.block_tables[i * batch.max_pages_per_seq + p] >= 0;
      ahead += held * spare.page_size > batch.context_lens[i] + spare.page_size - 1;
    }
  EXPECT_GT(ahead, 0) << "some row holds the page of its next position";

  EngineRun under_pressure = runTogether(requests, tight);
  EXPECT_EQ(outputsOf(under_pressure), alone);
  EXPECT_GT(under_pressure.stats.preemptions, 0);
  EngineRun waiting = runTogether(requests, busy);
  EXPECT_EQ(outputsOf(waiting), alone);
}

TEST(EngineTest, FewSequencesPerStepMatchesAlone) {
  std::vector<Request> requests = mixedRequests();
  SchedulerConfig config = generousConfig();
  config.max_num_seqs = 2;
  config.max_batch_tokens = 16;
  EngineRun together = runTogether(requests, config);
  EXPECT_EQ(outputsOf(together), outputsAlone(requests));
  EXPECT_EQ(together.stats.max_sequences_in_a_step, 2);
}

TEST(EngineTest, SameSeedsSameOutputsAcrossRuns) {
  std::vector<Request> requests = mixedRequests();
  EXPECT_EQ(outputsOf(runTogether(requests, generousConfig())),
            outputsOf(runTogether(requests, generousConfig())));
  std::vector<Request> reseeded = requests;
  reseeded[1].sampling.seed += 1;
  EXPECT_NE(outputsOf(runTogether(reseeded, generousConfig()))[1],
            outputsOf(runTogether(requests, generousConfig()))[1]);
}

TEST(EngineTest, StreamsEveryTokenInOrderAndMarksTheLast) {
  SchedulerConfig config = generousConfig();
  FakeExecutor executor(kVocab, config.num_pages, config.page_size);
  auto engine = Engine::create(executor, EngineConfig{config, {}});
  ASSERT_TRUE(engine.isOk());
  std::vector<TokenEvent> events;
  Request request = mixedRequests()[2];
  auto id = (*engine)->submit(request, [&](const TokenEvent &e) { events.push_back(e); });
  ASSERT_TRUE(id.isOk());
  ASSERT_TRUE((*engine)->runUntilIdle().isOk());
  ASSERT_EQ(events.size(), size_t(request.sampling.max_new_tokens));
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].request, *id);
    EXPECT_EQ(events[i].index, int32_t(i));
    EXPECT_EQ(events[i].finished, i + 1 == events.size());
  }
  EXPECT_EQ(events.back().finish_reason, FinishReason::kLength);
}

TEST(EngineTest, StopsAtEosUnlessIgnored) {
  Request request = mixedRequests()[4];
  request.sampling.max_new_tokens = 30;
  std::vector<int32_t> free_run = outputsAlone({request})[0];
  int32_t eos = free_run[3]; // make the 4th token an EOS
  size_t first_eos = std::find(free_run.begin(), free_run.end(), eos) - free_run.begin();

  EngineRun stopped = runTogether({request}, generousConfig(), {eos});
  EXPECT_EQ(stopped.results[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.results[0].output_ids,
            std::vector<int32_t>(free_run.begin(), free_run.begin() + first_eos + 1))
      << "output ends with, and includes, the EOS";

  Request ignoring = request;
  ignoring.sampling.ignore_eos = true;
  EngineRun ignored = runTogether({ignoring}, generousConfig(), {eos});
  EXPECT_EQ(ignored.results[0].output_ids, free_run);

  Request with_stop = request;
  with_stop.sampling.stop_token_ids = {eos};
  EngineRun stop_id = runTogether({with_stop}, generousConfig());
  EXPECT_EQ(stop_id.results[0].output_ids, stopped.results[0].output_ids);
}

TEST(EngineTest, GenerationStopsAtMaxSeqLen) {
  SchedulerConfig config = generousConfig();
  config.max_seq_len = 20;
  Request request;
  request.prompt_ids.assign(15, 3);
  request.sampling.max_new_tokens = 100;
  EngineRun run = runTogether({request}, config);
  EXPECT_EQ(run.results[0].output_ids.size(), 5u);
  EXPECT_EQ(run.results[0].finish_reason, FinishReason::kLength);
}

TEST(EngineTest, RejectsBadRequestsWithTheLimitNamed) {
  SchedulerConfig config = generousConfig();
  FakeExecutor executor(kVocab, config.num_pages, config.page_size);
  auto engine = Engine::create(executor, EngineConfig{config, {}});
  ASSERT_TRUE(engine.isOk());
  Request out_of_vocab;
  out_of_vocab.prompt_ids = {1, 2, kVocab};
  EXPECT_EQ((*engine)->submit(out_of_vocab).status().message(),
            "prompt token 2 is 50, outside the vocabulary of 50");
  Request too_long;
  too_long.prompt_ids.assign(128, 1);
  EXPECT_EQ((*engine)->submit(too_long).status().code(), StatusCode::kOutOfRange);
  Request bad_sampling;
  bad_sampling.prompt_ids = {1};
  bad_sampling.sampling.top_p = 2.0f;
  EXPECT_FALSE((*engine)->submit(bad_sampling).isOk());
  EXPECT_TRUE((*engine)->idle());

  EXPECT_EQ(Engine::create(executor, EngineConfig{config, {kVocab}}).status().message(),
            "EOS token 50 is outside the vocabulary of 50");
}

TEST(EngineTest, ExecutorFailureEndsEveryRequestAndFreesPages) {
  SchedulerConfig config = generousConfig();
  FakeExecutor executor(kVocab, config.num_pages, config.page_size);
  executor.failAtStep(3);
  auto engine = Engine::create(executor, EngineConfig{config, {}});
  ASSERT_TRUE(engine.isOk());
  std::vector<TokenEvent> last_events(2);
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE((*engine)
                    ->submit(mixedRequests()[i + 1],
                             [&last_events, i](const TokenEvent &e) { last_events[i] = e; })
                    .isOk());
  Status status = (*engine)->runUntilIdle();
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.message(), "step 4 (2 sequences, 2 tokens): injected failure");
  for (const TokenEvent &event : last_events) {
    EXPECT_TRUE(event.finished);
    EXPECT_EQ(event.finish_reason, FinishReason::kError);
  }
  EXPECT_TRUE((*engine)->idle());
  EXPECT_EQ((*engine)->scheduler().pages().numFreePages(), config.num_pages);
}

// A backend that samples "on the device": its own logits through the host
// sampler given only the RowSampling the engine passes (the uniform, not the
// seed), or -1 (NaN row) for the request named by nan_request. Equal outputs
// to host sampling mean the engine passed every row's choices. It also checks
// each sampled row's next_uniform against the uniform of that request's next
// sampled row (what a backend queueing the next step ahead draws with), and
// that a row said to go on (goes_on) is in the next step and one said to end
// is in none after (no request here has a stop token).
class FakeSamplingExecutor : public FakeExecutor {
public:
  using FakeExecutor::FakeExecutor;
  bool hasDeviceSampling() const override { return true; }
  Status executeSampled(const Batch &batch, const std::vector<RowSampling> &sampling,
                        int32_t *tokens) override {
    ++sampled_steps;
    EXPECT_EQ(sampling.size(), static_cast<size_t>(batch.numSequences()));
    std::vector<float> logits(static_cast<size_t>(batch.numSequences()) * vocabSize());
    TXC_RETURN_IF_ERROR(execute(batch, logits.data()));
    for (int32_t i = 0; i < batch.numSequences(); ++i) {
      if (sampling[i].uniform == 0.0 && sampling[i].next_uniform == 0.0)
        continue; // a prompt chunk's row: nothing drawn
      auto promise = next_uniforms.find(batch.request_ids[i]);
      if (promise != next_uniforms.end())
        ++(promise->second == sampling[i].uniform ? kept_promises : broken_promises);
      next_uniforms[batch.request_ids[i]] = sampling[i].next_uniform;
    }
    std::set<RequestId> here(batch.request_ids.begin(), batch.request_ids.end());
    for (RequestId id : going_on)
      ++(here.count(id) ? kept_goes_on : broken_goes_on);
    going_on.clear();
    for (int32_t i = 0; i < batch.numSequences(); ++i) {
      const RequestId id = batch.request_ids[i];
      if (ended.count(id))
        ++broken_goes_on;
      if (sampling[i].uniform == 0.0 && sampling[i].next_uniform == 0.0)
        continue; // a prompt chunk's row
      (sampling[i].goes_on ? going_on : ended).insert(id);
    }
    for (int32_t i = 0; i < batch.numSequences(); ++i) {
      const float *row = logits.data() + static_cast<size_t>(i) * vocabSize();
      StatusOr<int32_t> token = sampleTokenWithUniform(row, vocabSize(), sampling[i]);
      tokens[i] = token.isOk() && batch.request_ids[i] != nan_request ? *token : -1;
    }
    return Status::ok();
  }
  int64_t sampled_steps = 0;
  RequestId nan_request = -1;
  std::map<RequestId, double> next_uniforms;
  int64_t kept_promises = 0, broken_promises = 0;
  std::set<RequestId> going_on, ended;
  int64_t kept_goes_on = 0, broken_goes_on = 0;

};

TEST(EngineTest, DeviceSamplingGetsEachRowsChoicesAndMatchesHostSampling) {
  std::vector<Request> requests = mixedRequests(); // greedy and top-k/top-p sampled
  requests[3].sampling.top_k = 0;                  // temperature only
  requests[3].sampling.top_p = 1.0f;
  requests[3].sampling.temperature = 1.3f;
  requests[3].sampling.seed = 77;
  EngineRun host = runTogether(requests, generousConfig());
  SchedulerConfig config = generousConfig();
  FakeSamplingExecutor executor(kVocab, config.num_pages, config.page_size);
  auto engine = Engine::create(executor, EngineConfig{config, {}});
  ASSERT_TRUE(engine.isOk());
  auto results = (*engine)->generate(requests);
  ASSERT_TRUE(results.isOk()) << results.status().toString();
  EXPECT_EQ(outputsOf({*results, {}, {}}), outputsOf(host));
  EXPECT_EQ(executor.sampled_steps, static_cast<int64_t>(executor.batches().size()))
      << "every step samples on the device";
  EXPECT_GT(executor.kept_promises, 10);
  EXPECT_EQ(executor.broken_promises, 0) << "next_uniform is the next step's uniform";
  EXPECT_GT(executor.kept_goes_on, 10);
  EXPECT_EQ(executor.broken_goes_on, 0) << "goes_on says whether the row is in the next step";
  EXPECT_EQ(executor.ended.size(), requests.size()) << "every request's last step says it ends";
}

TEST(EngineTest, DeviceSamplingNanRowFailsTheStep) {
  SchedulerConfig config = generousConfig();
  FakeSamplingExecutor executor(kVocab, config.num_pages, config.page_size);
  executor.nan_request = 0;
  auto engine = Engine::create(executor, EngineConfig{config, {}});
  ASSERT_TRUE(engine.isOk());
  auto results = (*engine)->generate({mixedRequests()[0]});
  ASSERT_FALSE(results.isOk());
  EXPECT_NE(results.status().message().find("request 0: the logits row is NaN"),
            std::string::npos)
      << results.status().message();
  EXPECT_TRUE((*engine)->idle());
}

} // namespace
} // namespace txc::engine
