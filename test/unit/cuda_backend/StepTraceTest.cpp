//===- StepTraceTest.cpp - Summaries of a traced decode step --------------===//
//
// Host-only: summarizeDecodeTrace measures each kernel against the one
// before it (the first is left out), groups by label in order of first
// appearance, skips kernels with a stamp missing, and the shares add up to
// the step from the first kernel's exit to the last one's.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/StepTrace.h"

#include <gtest/gtest.h>

#include <cmath>

namespace txc::cuda {
namespace {

TEST(StepTraceTest, KernelsAreMeasuredAgainstTheOneBefore) {
  const double nan = std::nan("");
  // Two layers of GEMV -> attention: each GEMV starts 2 us before the
  // attention ends and waits 1 us past it; the attention starts when the
  // GEMV ends and waits 0.5 us.
  std::vector<DecodeTraceEntry> trace = {
      {"gemv", 0, 1, 0.5, 10},     {"attention", 10, 10.5, 10.5, 16},
      {"gemv", 14, 15, 17, 30},    {"attention", 30, 31, 30.5, 38},
      {"unstamped", nan, nan, nan, nan}, {"gemv", 37, 38, 39, 50},
  };
  std::vector<TraceKindSummary> kinds = summarizeDecodeTrace(trace);
  ASSERT_EQ(kinds.size(), 2u);
  EXPECT_EQ(kinds[0].label, "attention");
  EXPECT_EQ(kinds[0].count, 2);
  EXPECT_DOUBLE_EQ(kinds[0].share_us, (6.0 + 8.0) / 2);
  EXPECT_DOUBLE_EQ(kinds[0].wait_latency_us, (0.5 + 0.5) / 2);
  EXPECT_DOUBLE_EQ(kinds[0].early_start_us, 0.0);
  EXPECT_DOUBLE_EQ(kinds[0].after_wait_us, (5.5 + 7.5) / 2);
  EXPECT_DOUBLE_EQ(kinds[0].last_start_us, (0.5 + 1.0) / 2);
  // The second GEMV follows an attention; the third follows a kernel with
  // no exit stamp, so only one GEMV is measured.
  EXPECT_EQ(kinds[1].label, "gemv");
  EXPECT_EQ(kinds[1].count, 1);
  EXPECT_DOUBLE_EQ(kinds[1].share_us, 14.0);
  EXPECT_DOUBLE_EQ(kinds[1].wait_latency_us, 1.0);
  EXPECT_DOUBLE_EQ(kinds[1].early_start_us, 2.0);
  EXPECT_DOUBLE_EQ(kinds[1].after_wait_us, 13.0);
  EXPECT_DOUBLE_EQ(kinds[1].last_start_us, -1.0); // resident 1 us before the attention ended

  const std::string text = formatDecodeTrace(trace);
  EXPECT_NE(text.find("decode step trace: 6 kernels"), std::string::npos) << text;
  EXPECT_NE(text.find("shares sum to 28.0 us"), std::string::npos) << text;
  EXPECT_NE(text.find("unstamped"), std::string::npos) << text;
}

TEST(StepTraceTest, LatestOverBlocksPointsAreMeansAfterTheFirstWaitRelease) {
  // An attention that stamps its phases twice (the second 1 us slower in
  // each), between GEMVs that do not; phases are measured from the
  // attention's own first wait release. Only the first merged splits (the
  // merge points of the second are unstamped): their means are its own.
  DecodeTraceEntry gemv{"gemv", 0, 1, 2, 10};
  DecodeTraceEntry first{"attention", 9, 9.5, 10.5, 20};
  first.latest_entry_us = 11, first.latest_wait_release_us = 12, first.query_ready_us = 13,
  first.tiles_done_us = 15, first.partials_out_us = 16.5, first.merge_start_us = 17.5;
  DecodeTraceEntry later{"attention", 29, 29.5, 30.5, 41};
  later.latest_entry_us = 32, later.latest_wait_release_us = 33, later.query_ready_us = 34,
  later.tiles_done_us = 36;
  DecodeTraceEntry gemv2{"gemv", 19, 20, 21, 30};
  std::vector<TraceKindSummary> kinds = summarizeDecodeTrace({gemv, first, gemv2, later});
  ASSERT_EQ(kinds.size(), 2u);
  EXPECT_EQ(kinds[0].label, "attention");
  EXPECT_EQ(kinds[0].phase_count, 2);
  EXPECT_DOUBLE_EQ(kinds[0].latest_entry_us, (0.5 + 1.5) / 2);
  EXPECT_DOUBLE_EQ(kinds[0].latest_wait_release_us, (1.5 + 2.5) / 2);
  EXPECT_DOUBLE_EQ(kinds[0].query_ready_us, (2.5 + 3.5) / 2);
  EXPECT_DOUBLE_EQ(kinds[0].tiles_done_us, (4.5 + 5.5) / 2);
  EXPECT_EQ(kinds[0].merge_count, 1);
  EXPECT_DOUBLE_EQ(kinds[0].partials_out_us, 6.0);
  EXPECT_DOUBLE_EQ(kinds[0].merge_start_us, 7.0);
  EXPECT_EQ(kinds[1].label, "gemv");
  EXPECT_EQ(kinds[1].phase_count, 0);
  const std::string text = formatDecodeTrace({gemv, first, gemv2, later});
  EXPECT_NE(text.find("attention                                    after its first wait release: latest "
                      "start 1.00, latest wait 2.00, query ready 3.00, tiles done 5.00, partials out 6.00, "
                      "merge start 7.00, exit 10.00 us"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("20.00  [11.00, 12.00, 13.00, 15.00, 16.50, 17.50]"), std::string::npos) << text; // absolute
  EXPECT_NE(text.find("41.00  [32.00, 33.00, 34.00, 36.00]"), std::string::npos) << text; // no merge points
}

TEST(StepTraceTest, AnEmptyOrSingleKernelTraceHasNoKinds) {
  EXPECT_TRUE(summarizeDecodeTrace({}).empty());
  EXPECT_TRUE(summarizeDecodeTrace({{"gemv", 0, 1, 2, 3}}).empty());
}

TEST(StepTraceTest, BlockZeroCyclesAreMeansOverFullyStampedEntries) {
  // Three attentions: two with every block-0 point, one with a point
  // missing (left out of the means, not counted as zero).
  DecodeTraceEntry gemv{"gemv", 0, 1, 2, 10};
  DecodeTraceEntry a{"attention", 9, 9.5, 10.5, 20}, b{"attention", 29, 29.5, 30.5, 40},
      c{"attention", 49, 49.5, 50.5, 60};
  for (int p = 0; p < kTraceBlock0Points - 1; ++p) {
    a.block0_cycles[p] = 100.0 * (p + 1);
    b.block0_cycles[p] = 300.0 * (p + 1);
    c.block0_cycles[p] = 1e6;
  }
  c.block0_cycles[3] = std::nan("");
  DecodeTraceEntry gemv2{"gemv", 19, 20, 21, 30}, gemv3{"gemv", 39, 40, 41, 50};
  std::vector<DecodeTraceEntry> trace = {gemv, a, gemv2, b, gemv3, c};
  std::vector<TraceKindSummary> kinds = summarizeDecodeTrace(trace);
  ASSERT_EQ(kinds.size(), 2u);
  EXPECT_EQ(kinds[0].block0_count, 2);
  EXPECT_DOUBLE_EQ(kinds[0].block0_cycles[0], 200.0);
  EXPECT_DOUBLE_EQ(kinds[0].block0_cycles[7], 1600.0);
  EXPECT_EQ(kinds[1].block0_count, 0);
  const std::string text = formatDecodeTrace(trace);
  EXPECT_NE(text.find("block 0, SM cycles after its wait release: fold loaded 200, heads done 400, query "
                      "ready 600, first tile 800, tiles computed 1000, tiles done 1200, states stored 1400, "
                      "exit 1600"),
            std::string::npos)
      << text;
}

} // namespace
} // namespace txc::cuda
