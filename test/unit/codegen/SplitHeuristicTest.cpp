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

TEST(SplitHeuristic, LargeBatchesDoNotSplit) {
  EXPECT_EQ(chooseDecodeSplits(h200(64, 8, 4096)), 1);
  EXPECT_EQ(chooseDecodeSplits(h200(64, 8, 16384)), 1);
  EXPECT_EQ(chooseDecodeSplits(h200(256, 8, 2048)), 1);
}

TEST(SplitHeuristic, ShortContextsRespectTheMinimumChunk) {
  EXPECT_EQ(chooseDecodeSplits(h200(1, 8, 100)), 1);
  DecodeSplitInputs in = h200(1, 8, 1000);
  const int splits = chooseDecodeSplits(in);
  EXPECT_GT(splits, 1);
  EXPECT_GE((1000 + splits - 1) / splits, in.min_tokens_per_split);
}

TEST(SplitHeuristic, MediumBatchSplitsToCoverResidentSlots) {
  DecodeSplitInputs in = h200(4, 8, 8192);
  const int splits = chooseDecodeSplits(in);
  EXPECT_GE(splits * 32, 132 * 2);
  EXPECT_LE(splits, in.max_splits);
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
