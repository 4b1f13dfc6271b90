//===- SamplingTest.cpp - Greedy, temperature, top-k, top-p, seeds --------===//
#include "txc/engine/Sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

namespace txc::engine {
namespace {

std::vector<float> logitsForProbabilities(const std::vector<double> &probabilities) {
  std::vector<float> logits;
  for (double p : probabilities)
    logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

int32_t sample(const std::vector<float> &logits, const SamplingParams &params,
               uint64_t step) {
  auto token = sampleToken(logits.data(), static_cast<int32_t>(logits.size()),
                           params, step);
  EXPECT_TRUE(token.isOk()) << token.status().toString();
  return token.isOk() ? *token : -1;
}

std::map<int32_t, int> histogram(const std::vector<float> &logits,
                                 SamplingParams params, int draws) {
  std::map<int32_t, int> counts;
  for (int step = 0; step < draws; ++step)
    ++counts[sample(logits, params, step)];
  return counts;
}

TEST(SamplingTest, GreedyTakesTheArgmaxAndTheLowestIdOnTies) {
  SamplingParams greedy;
  EXPECT_EQ(sample({0.1f, 3.0f, -1.0f, 2.9f}, greedy, 0), 1);
  EXPECT_EQ(sample({1.0f, 5.0f, 5.0f}, greedy, 0), 1);
  SamplingParams top1;
  top1.temperature = 1.0f;
  top1.top_k = 1;
  EXPECT_EQ(sample({0.0f, 0.5f, 0.4f}, top1, 3), 1);
}

TEST(SamplingTest, TemperatureSamplingFollowsTheSoftmax) {
  std::vector<double> probabilities = {0.5, 0.3, 0.15, 0.05};
  SamplingParams params;
  params.temperature = 1.0f;
  params.seed = 17;
  const int draws = 20000;
  auto counts = histogram(logitsForProbabilities(probabilities), params, draws);
  for (size_t token = 0; token < probabilities.size(); ++token) {
    double expected = probabilities[token] * draws;
    double sigma = std::sqrt(expected * (1 - probabilities[token]));
    EXPECT_NEAR(counts[token], expected, 5 * sigma) << "token " << token;
  }
}

TEST(SamplingTest, LowTemperatureSharpensHighFlattens) {
  std::vector<float> logits = logitsForProbabilities({0.6, 0.4});
  SamplingParams cold, hot;
  cold.temperature = 0.1f; // 0.6^10 : 0.4^10 = 98% : 2%
  hot.temperature = 10.0f; // nearly uniform
  EXPECT_GT(histogram(logits, cold, 2000)[0], 1900);
  int hot_first = histogram(logits, hot, 2000)[0];
  EXPECT_GT(hot_first, 900);
  EXPECT_LT(hot_first, 1150);
}

TEST(SamplingTest, TopKKeepsOnlyTheKMostLikely) {
  std::vector<float> logits = {1.0f, 4.0f, 3.0f, 2.0f, 3.5f, 0.0f};
  SamplingParams params;
  params.temperature = 5.0f; // flat enough that all six would appear
  params.top_k = 3;
  auto counts = histogram(logits, params, 3000);
  EXPECT_EQ(counts.size(), 3u);
  for (int32_t token : {1, 4, 2})
    EXPECT_GT(counts[token], 0) << token;
  params.top_k = 0;
  EXPECT_EQ(histogram(logits, params, 3000).size(), 6u);
}

TEST(SamplingTest, TopPKeepsTheSmallestNucleus) {
  // Sorted: 0.4 (t2), 0.3 (t0), 0.2 (t3), 0.1 (t1). top_p = 0.65 needs the
  // first two (0.7); 0.75 needs three.
  std::vector<float> logits = logitsForProbabilities({0.3, 0.1, 0.4, 0.2});
  SamplingParams params;
  params.temperature = 1.0f;
  params.top_p = 0.65f;
  auto counts = histogram(logits, params, 4000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts[2], 0);
  EXPECT_GT(counts[0], 0);
  // Renormalised over the nucleus: 0.4/0.7 of the draws.
  EXPECT_NEAR(counts[2] / 4000.0, 0.4 / 0.7, 0.03);
  params.top_p = 0.75f;
  EXPECT_EQ(histogram(logits, params, 4000).size(), 3u);
}

TEST(SamplingTest, SeedsMakeDrawsReproducibleAndDistinct) {
  std::vector<float> logits(64, 0.0f); // uniform over 64 tokens
  SamplingParams a;
  a.temperature = 1.0f;
  a.seed = 1;
  SamplingParams b = a;
  b.seed = 2;
  std::vector<int32_t> first, again, other;
  for (uint64_t step = 0; step < 32; ++step) {
    first.push_back(sample(logits, a, step));
    again.push_back(sample(logits, a, step));
    other.push_back(sample(logits, b, step));
  }
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
  EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 16u)
      << "consecutive steps must not repeat one draw";
}

TEST(SamplingTest, InvalidParametersNameTheField) {
  SamplingParams params;
  params.top_p = 0.0f;
  EXPECT_EQ(validateSamplingParams(params, 10).message(),
            "top_p is 0.000000; it must lie in (0, 1]");
  params = {};
  params.temperature = -1.0f;
  EXPECT_NE(validateSamplingParams(params, 10).message().find("temperature"),
            std::string::npos);
  params = {};
  params.max_new_tokens = 0;
  EXPECT_NE(validateSamplingParams(params, 10).message().find("max_new_tokens"),
            std::string::npos);
  params = {};
  params.top_k = -2;
  EXPECT_NE(validateSamplingParams(params, 10).message().find("top_k"),
            std::string::npos);
  params = {};
  params.stop_token_ids = {10};
  EXPECT_EQ(validateSamplingParams(params, 10).message(),
            "stop token 10 is outside the vocabulary of 10");
  EXPECT_TRUE(validateSamplingParams(SamplingParams{}, 10).isOk());
}

TEST(SamplingTest, NanOrAllInfiniteLogitsAreErrorsNotCrashes) {
  std::vector<float> nan_logits = {0.0f, std::nanf(""), 1.0f};
  auto nan_token = sampleToken(nan_logits.data(), 3, SamplingParams{}, 0);
  ASSERT_FALSE(nan_token.isOk());
  EXPECT_EQ(nan_token.status().message(),
            "logits contain NaN at token 1 (vocabulary 3)");
  std::vector<float> dead(3, -INFINITY);
  EXPECT_FALSE(sampleToken(dead.data(), 3, SamplingParams{}, 0).isOk());
}

} // namespace
} // namespace txc::engine
