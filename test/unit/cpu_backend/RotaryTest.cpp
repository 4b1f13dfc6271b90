//===- RotaryTest.cpp - Rotary frequencies for every HF rope_type ----------===//
//
// Each scaling is checked two ways: against the closed-form formula of HF's
// modeling_rope_utils.py recomputed here in double, and at a few pinned
// numbers computed separately (numpy, following HF's fp32 steps), so a
// mistake shared by the kernel and the test formula still shows.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cpu/Rotary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace txc::cpu {
namespace {

double plainInvFreq(double theta, int64_t i, int64_t dim) {
  return std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
}

void expectRelNear(double actual, double expected, double rel, const std::string &what) {
  EXPECT_NEAR(actual, expected, rel * std::fabs(expected) + 1e-12) << what;
}

TEST(Rotary, DefaultMatchesThetaPower) {
  RopeParams rope;
  rope.theta = 1e6;
  RotaryFrequencies f = computeRotaryFrequencies(rope, 128, 0);
  ASSERT_EQ(f.inv_freq.size(), 64u);
  for (int64_t i = 0; i < 64; ++i)
    expectRelNear(f.inv_freq[i], plainInvFreq(1e6, i, 128), 2e-6, "pair " + std::to_string(i));
  EXPECT_EQ(f.attention_scaling, 1.0f);
}

TEST(Rotary, LinearDividesByFactor) {
  RopeParams rope;
  rope.scaling = RopeScaling::kLinear;
  rope.factor = 4.0;
  RotaryFrequencies f = computeRotaryFrequencies(rope, 64, 0);
  for (int64_t i = 0; i < 32; ++i)
    expectRelNear(f.inv_freq[i], plainInvFreq(10000, i, 64) / 4.0, 2e-6, "pair " + std::to_string(i));
}

TEST(Rotary, DynamicGrowsTheBaseBeyondTheTrainedLength) {
  RopeParams rope;
  rope.scaling = RopeScaling::kDynamic;
  rope.factor = 2.0;
  rope.original_max_position = 16;
  // At or below the trained length: the plain frequencies.
  RotaryFrequencies short_seq = computeRotaryFrequencies(rope, 8, 16);
  for (int64_t i = 0; i < 4; ++i)
    expectRelNear(short_seq.inv_freq[i], plainInvFreq(10000, i, 8), 2e-6, "short");
  // 32 tokens: base' = theta * (factor * 32 / 16 - (factor - 1))^(d / (d - 2))
  // = 10000 * 3^(4/3) = 43267.487...
  RotaryFrequencies long_seq = computeRotaryFrequencies(rope, 8, 32);
  const double pinned[4] = {1.0, 0.06933612743506347, 0.004807498567691361,
                            0.0003333333333333334};
  double base = 10000.0 * std::pow(3.0, 4.0 / 3.0);
  for (int64_t i = 0; i < 4; ++i) {
    expectRelNear(long_seq.inv_freq[i], plainInvFreq(base, i, 8), 2e-6, "formula");
    expectRelNear(long_seq.inv_freq[i], pinned[i], 2e-6, "pinned");
  }
}

TEST(Rotary, Llama3KeepsHighDividesLowBlendsMiddle) {
  RopeParams rope;
  rope.theta = 500000.0;
  rope.scaling = RopeScaling::kLlama3;
  rope.factor = 8.0;
  rope.low_freq_factor = 1.0;
  rope.high_freq_factor = 4.0;
  rope.original_max_position = 8192;
  RotaryFrequencies f = computeRotaryFrequencies(rope, 128, 0);
  ASSERT_EQ(f.inv_freq.size(), 64u);
  int low = 0, mid = 0, high = 0;
  for (int64_t i = 0; i < 64; ++i) {
    double plain = plainInvFreq(500000.0, i, 128);
    double wavelen = 2 * M_PI / plain;
    double expected;
    if (wavelen < 8192.0 / 4.0) {
      expected = plain;
      ++high;
    } else if (wavelen > 8192.0 / 1.0) {
      expected = plain / 8.0;
      ++low;
    } else {
      double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      expected = (1 - smooth) * plain / 8.0 + smooth * plain;
      ++mid;
    }
    expectRelNear(f.inv_freq[i], expected, 1e-5, "pair " + std::to_string(i));
  }
  // All three regimes occur (pairs 29..34 are the blended ones).
  EXPECT_EQ(mid, 6);
  EXPECT_GT(low, 0);
  EXPECT_GT(high, 0);
  expectRelNear(f.inv_freq[29], 0.0021665706, 1e-6, "pinned 29");
  expectRelNear(f.inv_freq[34], 0.00017850779, 1e-6, "pinned 34");
  expectRelNear(f.inv_freq[63], 3.068926e-07, 1e-6, "pinned 63");
}

TEST(Rotary, YarnRampAttentionFactorAndTruncate) {
  RopeParams rope;
  rope.scaling = RopeScaling::kYarn;
  rope.factor = 4.0;
  rope.original_max_position = 2048;
  // beta_fast / beta_slow / attention_factor left 0: HF's defaults 32, 1 and
  // 0.1 * ln(4) + 1.
  RotaryFrequencies f = computeRotaryFrequencies(rope, 64, 0);
  EXPECT_NEAR(f.attention_scaling, 0.1 * std::log(4.0) + 1.0, 1e-6);
  EXPECT_NEAR(f.attention_scaling, 1.138629436111989, 1e-6);
  // Correction range: d * ln(L / (2 pi beta)) / (2 ln theta) = 8.06 and
  // 20.1, truncated outward to [8, 21].
  auto correction = [](double beta) {
    return 64.0 * std::log(2048.0 / (beta * 2 * M_PI)) / (2 * std::log(10000.0));
  };
  double low = std::floor(correction(32)), high = std::ceil(correction(1));
  ASSERT_EQ(low, 8.0);
  ASSERT_EQ(high, 21.0);
  for (int64_t i = 0; i < 32; ++i) {
    double plain = plainInvFreq(10000, i, 64);
    double ramp = std::min(1.0, std::max(0.0, (i - low) / (high - low)));
    double expected = plain / 4.0 * ramp + plain * (1.0 - ramp);
    expectRelNear(f.inv_freq[i], expected, 1e-5, "pair " + std::to_string(i));
  }
  expectRelNear(f.inv_freq[10], 0.049745575, 1e-6, "pinned 10");
  expectRelNear(f.inv_freq[15], 0.007949839, 1e-6, "pinned 15");
  expectRelNear(f.inv_freq[31], 3.3338038e-05, 1e-6, "pinned 31");

  // truncate = false (gpt-oss): the ramp runs over the exact range.
  rope.yarn_truncate = false;
  RotaryFrequencies exact = computeRotaryFrequencies(rope, 64, 0);
  expectRelNear(exact.inv_freq[10], 0.049453083, 1e-6, "untruncated 10");
  expectRelNear(exact.inv_freq[15], 0.007574179, 1e-6, "untruncated 15");

  rope.attention_factor = 0.75;
  EXPECT_FLOAT_EQ(computeRotaryFrequencies(rope, 64, 0).attention_scaling, 0.75f);
}

TEST(Rotary, RotateHalfOnTheRotaryDimsOnly) {
  RopeParams rope;
  rope.rotary_dim = 4; // partial rotary: 4 of 8 dimensions rotate
  RotaryFrequencies f = computeRotaryFrequencies(rope, 8, 0);
  ASSERT_EQ(f.inv_freq.size(), 2u);
  // The exponent uses rotary_dim, as HF's dim = head_dim * partial factor.
  expectRelNear(f.inv_freq[1], std::pow(10000.0, -2.0 / 4.0), 1e-6, "inv_freq");
  std::vector<float> x = {0.3f, -1.2f, 0.7f, 2.0f, 5.0f, -6.0f, 7.0f, 8.5f};
  std::vector<float> rotated = x;
  const int32_t position = 37;
  applyRotary(rotated.data(), f, position);
  for (int i = 0; i < 2; ++i) {
    double angle = position * plainInvFreq(10000, i, 4);
    // Pair (i, i + 2): x1 cos - x2 sin, x2 cos + x1 sin.
    EXPECT_NEAR(rotated[i], x[i] * std::cos(angle) - x[i + 2] * std::sin(angle), 2e-5);
    EXPECT_NEAR(rotated[i + 2], x[i + 2] * std::cos(angle) + x[i] * std::sin(angle), 2e-5);
  }
  for (int i = 4; i < 8; ++i)
    EXPECT_EQ(rotated[i], x[i]) << "pass-through dim " << i;
}

TEST(Rotary, ValidationNamesTheParameter) {
  RopeParams rope;
  rope.rotary_dim = 5;
  Status odd = validateRopeParams(rope, 8);
  EXPECT_NE(odd.message().find("rope.rotary_dim"), std::string::npos) << odd.toString();
  rope.rotary_dim = 0;
  rope.scaling = RopeScaling::kYarn;
  rope.factor = 4.0;
  Status yarn = validateRopeParams(rope, 8);
  EXPECT_NE(yarn.message().find("rope.original_max_position"), std::string::npos);
  EXPECT_FALSE(parseRopeScaling("longrope").isOk());
}

} // namespace
} // namespace txc::cpu
