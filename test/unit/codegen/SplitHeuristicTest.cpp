//===- SplitHeuristicTest.cpp - Decode split-KV heuristic -----------------===//
#include <gtest/gtest.h>

#include "attention/split_heuristic.h"

using txc::kernels::chooseDecodeSplits;
using txc::kernels::DecodeSplitInputs;

namespace {

DecodeSplitInputs h200(int batch, int kv_heads, int kv_len, int ctas_per_sm = 2) {
  DecodeSplitInputs in;
  in.batch = batch;
  in.num_kv_heads = kv_heads;
  in.max_kv_len = kv_len;
  in.num_sms = 132;
  in.ctas_per_sm = ctas_per_sm;
  return in;
}

TEST(SplitHeuristic, OneSequenceFillsEverySm) {
  for (int len : {4096, 8192, 16384, 32768}) {
    DecodeSplitInputs in = h200(1, 8, len);
    const int splits = chooseDecodeSplits(in);
    EXPECT_GE(splits * in.num_kv_heads, in.num_sms) << "context " << len;
    EXPECT_GE(len / splits, in.min_tokens_per_split - 1) << "context " << len;
    EXPECT_LE(splits, in.max_splits);
  }
}

TEST(SplitHeuristic, OneSequenceLeavesTheLaunchBeforesMergersASlot) {
  // 33 splits of 8 kv heads would fill all 264 slots (run 286: 48.7 us at
  // b1 L32768 against 47.2 at 32).
  EXPECT_EQ(chooseDecodeSplits(h200(1, 8, 32768)), 32);
  EXPECT_EQ(chooseDecodeSplits(h200(1, 8, 16384)), 32);
  // 16 splits of b2 leave 8 slots free already: unchanged.
  EXPECT_EQ(chooseDecodeSplits(h200(2, 8, 8192)), 16);
}

TEST(SplitHeuristic, ShortContextsFillTheWaveNotTheStages) {
  // b1 L4096: 32 chunks of two tiles, not 22 of three that the K/V stages
  // would hold whole before the PDL wait (faster back to back, run 289, but
  // 1.0-1.3 us a layer slower in the decode step, runs 291-292).
  EXPECT_EQ(chooseDecodeSplits(h200(1, 8, 4096)), 32);
  EXPECT_EQ(chooseDecodeSplits(h200(2, 8, 2048)), 16);
}

TEST(SplitHeuristic, LargeBatchesDoNotSplit) {
  EXPECT_EQ(chooseDecodeSplits(h200(64, 8, 4096)), 1);
  EXPECT_EQ(chooseDecodeSplits(h200(64, 8, 16384)), 1);
  EXPECT_EQ(chooseDecodeSplits(h200(256, 8, 2048)), 1);
}

TEST(SplitHeuristic, PastAWaveSplitsOnlyWhereTheWavesShrink) {
  EXPECT_EQ(chooseDecodeSplits(h200(40, 8, 4096)), 4); // 320 CTAs: 1.21 waves
  EXPECT_EQ(chooseDecodeSplits(h200(34, 8, 4096)), 4); // 272: 1.03
  EXPECT_EQ(chooseDecodeSplits(h200(48, 8, 4096)), 2); // 384: 1.45
  EXPECT_EQ(chooseDecodeSplits(h200(60, 8, 4096)), 1); // 480: 1.82
}

TEST(SplitHeuristic, ShortContextsRespectTheMinimumChunk) {
  EXPECT_EQ(chooseDecodeSplits(h200(1, 8, 100)), 1);
  DecodeSplitInputs in = h200(1, 8, 1000);
  const int splits = chooseDecodeSplits(in);
  EXPECT_GT(splits, 1);
  EXPECT_GE((1000 + splits - 1) / splits, in.min_tokens_per_split);
}

TEST(SplitHeuristic, MediumBatchSplitsFillOneWaveWithoutSpilling) {
  // 264 resident slots (132 SMs, two CTAs each). A grid past them runs a
  // second wave of whole chunks: batch 4 at 9 splits (288 CTAs) read 65% of
  // copy against 95% at 8 (256), run 246.
  EXPECT_EQ(chooseDecodeSplits(h200(4, 8, 8192)), 8);
  // 11 splits (264 CTAs) would fill every slot: the last blocks wait for
  // the launch before's mergers (b3 37.3 us at 11, 36.3 at 10, run 286).
  EXPECT_EQ(chooseDecodeSplits(h200(3, 8, 8192)), 10);
  EXPECT_EQ(chooseDecodeSplits(h200(2, 8, 8192)), 16);
  EXPECT_EQ(chooseDecodeSplits(h200(12, 8, 4096)), 2);
  // 192 CTAs unsplit fill 73% of the slots; two splits would spill 120.
  EXPECT_EQ(chooseDecodeSplits(h200(24, 8, 2048)), 1);
  for (int batch = 1; batch <= 33; ++batch) {
    const int splits = chooseDecodeSplits(h200(batch, 8, 32768));
    if (splits > 1)
      EXPECT_LE(batch * 8 * splits, 264) << "batch " << batch;
  }
}

TEST(SplitHeuristic, MinSplitsHoldsAtFullWavesWithinTheMinimumChunk) {
  DecodeSplitInputs in = h200(32, 8, 256); // 256 CTAs: a near-full wave
  in.min_tokens_per_split = 16;
  EXPECT_EQ(chooseDecodeSplits(in), 1);
  in.min_splits = 2;
  EXPECT_EQ(chooseDecodeSplits(in), 2);
  in.min_splits = 4;
  EXPECT_EQ(chooseDecodeSplits(in), 4);
  in.max_kv_len = 40; // chunks of 16 allow 2
  EXPECT_EQ(chooseDecodeSplits(in), 2);
  in.max_kv_len = 10; // not even one chunk of 16: no split
  EXPECT_EQ(chooseDecodeSplits(in), 1);
  // Below a full wave the fill rule still decides when it asks for more.
  DecodeSplitInputs one = h200(1, 8, 4096);
  const int filled = chooseDecodeSplits(one);
  one.min_splits = 2;
  EXPECT_EQ(chooseDecodeSplits(one), filled);
}

TEST(SplitHeuristic, DegenerateInputsStillGiveOneSplit) {
  EXPECT_EQ(chooseDecodeSplits(h200(0, 0, 0, 0)), 1);
}

} // namespace
