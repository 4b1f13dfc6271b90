//===- StreamKTest.cpp - The decode GEMM's stream-K schedule --------------===//
//
// Host-only: for GEMM shapes from one chunk to Llama-3-8B's gate/up and grids
// from one CTA to one per step (launchDecodeGemm never gives a CTA an empty
// range; StreamK assumes it), the ranges must cover every
// (tile, chunk) step once with lengths one apart, ctaOf must invert them,
// each tile's sharers must be exactly the CTAs whose ranges meet it, and the
// partial slots must be unique and below ctas + tiles (the workspace bound
// launchDecodeGemm sizes by).
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/StreamK.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

namespace txc::cuda {
namespace {

void checkSchedule(int64_t tiles, int64_t chunks, int64_t ctas) {
  SCOPED_TRACE("tiles " + std::to_string(tiles) + " chunks " + std::to_string(chunks) + " ctas " +
               std::to_string(ctas));
  const StreamK s{tiles * chunks, ctas};
  ASSERT_EQ(s.rangeBegin(0), 0);
  ASSERT_EQ(s.rangeBegin(ctas), s.total);
  const int64_t shortest = s.total / ctas;
  std::set<int64_t> slots;
  for (int64_t cta = 0; cta < ctas; ++cta) {
    const int64_t begin = s.rangeBegin(cta), end = s.rangeBegin(cta + 1);
    ASSERT_GE(end - begin, shortest);
    ASSERT_LE(end - begin, shortest + 1);
    for (int64_t u = begin; u < end; ++u)
      ASSERT_EQ(s.ctaOf(u), cta) << "step " << u;
    if (begin == end)
      continue;
    for (int64_t tile = begin / chunks; tile <= (end - 1) / chunks; ++tile) {
      const int64_t slot = StreamK::slot(cta, tile);
      EXPECT_TRUE(slots.insert(slot).second) << "slot " << slot << " twice";
      EXPECT_LT(slot, ctas + tiles);
    }
  }
  for (int64_t tile = 0; tile < tiles; ++tile) {
    std::set<int64_t> sharers;
    for (int64_t u = tile * chunks; u < (tile + 1) * chunks; ++u)
      sharers.insert(s.ctaOf(u));
    ASSERT_EQ(static_cast<int64_t>(sharers.size()), s.parts(tile, chunks)) << "tile " << tile;
    EXPECT_EQ(*sharers.begin(), s.firstCta(tile, chunks)) << "tile " << tile;
    EXPECT_EQ(*sharers.rbegin(), s.firstCta(tile, chunks) + s.parts(tile, chunks) - 1);
  }
}

TEST(StreamKTest, CoversEveryStepOnceAndNamesEachPartOnce) {
  const int64_t shapes[][2] = {{1, 1},    {4, 8},   {3, 12},    {64, 64}, {4, 224},
                               {448, 64}, {65, 16}, {2004, 64}, {7, 5}};
  for (const auto &shape : shapes) {
    const int64_t tiles = shape[0], chunks = shape[1], total = tiles * chunks;
    for (int64_t ctas : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{132}, int64_t{264},
                         int64_t{396}, total / 4, total - 1, total})
      if (ctas >= 1 && ctas <= total)
        checkSchedule(tiles, chunks, ctas);
  }
}

} // namespace
} // namespace txc::cuda
