//===- PrefillTileOrderTest.cpp - How prefill CTAs walk their tiles -------===//
//
// Host-only: for query-block counts from 1 to 64 and several head counts,
// every walk must visit each tile exactly once, keep each (head, sequence)'s
// tiles consecutive, put each head's longest query block first, and (the
// mirrored pairs) give every CTA of a head the same causal work; the
// stream-K tail must run every step of its tiles once, with each owner
// merging exactly the parts of its tile, which wait for nothing.
//
//===----------------------------------------------------------------------===//
#include "attention/tile_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace txc::kernels {
namespace {

std::vector<int> visits(PrefillWalk walk, int num_tiles, int ctas) {
  std::vector<int> count(num_tiles, 0);
  for (int cta = 0; cta < ctas; ++cta)
    for (int t = prefillFirstTile(walk, cta); t < num_tiles;
         t = prefillTileAfter(walk, t, ctas, num_tiles))
      ++count[t];
  return count;
}

TEST(PrefillTileOrderTest, EveryWalkRunsEachTileOnce) {
  for (int m_blocks = 1; m_blocks <= 64; ++m_blocks)
    for (int heads : {1, 3, 32}) {
      const int num_tiles = m_blocks * heads;
      struct Launch {
        PrefillWalk walk;
        int ctas;
      };
      for (Launch l :
           {Launch{PrefillWalk::kOneTile, num_tiles},
            Launch{PrefillWalk::kOneTile, 2 * num_tiles}, // a larger grid: extras exit
            Launch{PrefillWalk::kMirroredPair,
                   prefillCtasFor(PrefillWalk::kMirroredPair, num_tiles)},
            Launch{PrefillWalk::kMirroredPair, 1}, Launch{PrefillWalk::kMirroredPair, 7},
            Launch{PrefillWalk::kMirroredPair, 132}, // persistent pairs
            Launch{PrefillWalk::kPersistent, 1}, Launch{PrefillWalk::kPersistent, 7},
            Launch{PrefillWalk::kPersistent, 132}, Launch{PrefillWalk::kPersistent, num_tiles}}) {
        const std::vector<int> count = visits(l.walk, num_tiles, l.ctas);
        for (int t = 0; t < num_tiles; ++t)
          ASSERT_EQ(count[t], 1) << "walk " << static_cast<int>(l.walk) << " ctas " << l.ctas
                                 << " m_blocks " << m_blocks << " heads " << heads << " tile " << t;
      }
    }
}

TEST(PrefillTileOrderTest, EachHeadsQueryBlocksOnceLongestFirst) {
  for (PrefillWalk walk : {PrefillWalk::kOneTile, PrefillWalk::kMirroredPair})
    for (int m_blocks = 1; m_blocks <= 64; ++m_blocks)
      for (int head = 0; head < 3; ++head) {
        std::vector<int> seen(m_blocks, 0);
        for (int q = 0; q < m_blocks; ++q) {
          const int block = prefillQueryBlock(walk, head * m_blocks + q, m_blocks);
          ASSERT_GE(block, 0);
          ASSERT_LT(block, m_blocks);
          ++seen[block];
        }
        for (int b = 0; b < m_blocks; ++b)
          ASSERT_EQ(seen[b], 1) << "walk " << static_cast<int>(walk) << " m_blocks " << m_blocks;
        EXPECT_EQ(prefillQueryBlock(walk, head * m_blocks, m_blocks), m_blocks - 1);
      }
}

TEST(PrefillTileOrderTest, MirroredPairsCarryEqualCausalWork) {
  // A causal query block b sees b + 1 key blocks (equal q and kv lengths):
  // each pair inside one head sums to m_blocks + 1.
  for (int m_blocks = 2; m_blocks <= 64; m_blocks += 2)
    for (int c = 0; c < m_blocks / 2; ++c) {
      const int first = prefillQueryBlock(PrefillWalk::kMirroredPair, 2 * c, m_blocks);
      const int second = prefillQueryBlock(PrefillWalk::kMirroredPair, 2 * c + 1, m_blocks);
      EXPECT_EQ((first + 1) + (second + 1), m_blocks + 1)
          << "m_blocks " << m_blocks << " cta " << c;
      EXPECT_GT(first, second) << "the longer tile first";
    }
}

TEST(PrefillTileOrderTest, StreamKTailRunsEachStepOnceAndMergesItsParts) {
  for (int ctas : {1, 7, 132})
    for (int tail_tiles = 1; tail_tiles <= ctas; tail_tiles += (ctas > 8 ? 5 : 1))
      for (int steps : {0, 1, 2, 3, 5, 8, 32, 129}) {
        const std::string shape = "ctas " + std::to_string(ctas) + " tail " + std::to_string(tail_tiles) +
                                  " steps " + std::to_string(steps);
        std::vector<int> runs(tail_tiles * steps, 0), owners(tail_tiles, 0), waiters(tail_tiles, 0);
        std::vector<int> owner_cta(tail_tiles, -1), merges(tail_tiles, 0);
        std::vector<std::vector<int>> waiting_ctas(tail_tiles);
        for (int cta = 0; cta < ctas; ++cta)
          for (int index = 0; index < 2; ++index) {
            const PrefillTailPart part = prefillTailPart(cta, index, ctas, tail_tiles, steps);
            if (part.tile < 0)
              continue;
            ASSERT_LT(part.tile, tail_tiles) << shape;
            ASSERT_GE(part.s_begin, 0) << shape;
            ASSERT_LE(part.s_begin + part.count, steps) << shape;
            ASSERT_TRUE(part.count > 0 || steps == 0) << shape << " cta " << cta;
            for (int s = part.s_begin; s < part.s_begin + part.count; ++s)
              ++runs[part.tile * steps + s];
            if (part.s_begin == 0) {
              ++owners[part.tile];
              owner_cta[part.tile] = cta;
              merges[part.tile] = part.merges;
            } else {
              ASSERT_EQ(index, 0) << shape << " cta " << cta << ": a waiter is its CTA's first part";
              ASSERT_EQ(part.merges, 0) << shape;
              waiting_ctas[part.tile].push_back(cta);
            }
          }
        for (int i = 0; i < tail_tiles * steps; ++i)
          ASSERT_EQ(runs[i], 1) << shape << " step " << i;
        for (int j = 0; j < tail_tiles; ++j) {
          ASSERT_EQ(owners[j], 1) << shape << " tile " << j;
          // The owner reads the slots of CTAs owner + 1 ... owner + merges.
          ASSERT_EQ(merges[j], (int)waiting_ctas[j].size()) << shape << " tile " << j;
          for (int k = 0; k < merges[j]; ++k)
            ASSERT_EQ(waiting_ctas[j][k], owner_cta[j] + 1 + k) << shape << " tile " << j;
        }
      }
}

// The persistent pairs' walk with its tail (PrefillPairTail): each CTA's
// grid tiles in walk order.
std::vector<std::vector<int>> pairTailWalks(int num_tiles, int m_blocks, int ctas) {
  const PrefillPairTail tail = prefillPairTail(num_tiles, m_blocks, ctas);
  const int walk_space = tail.tail_tiles > 0 ? tail.whole_tiles + 2 * ctas : num_tiles;
  std::vector<std::vector<int>> walks(ctas);
  for (int cta = 0; cta < ctas; ++cta)
    for (int t = prefillFirstTile(PrefillWalk::kMirroredPair, cta); t < walk_space;
         t = prefillTileAfter(PrefillWalk::kMirroredPair, t, ctas, walk_space)) {
      const int tile = prefillPairWalkTile(t, tail, ctas, m_blocks);
      if (tile >= 0)
        walks[cta].push_back(tile);
    }
  return walks;
}

TEST(PrefillTileOrderTest, PairTailRunsEachTileOnce) {
  for (int m_blocks = 1; m_blocks <= 64; ++m_blocks)
    for (int heads : {1, 3, 32, 256})
      for (int ctas : {1, 7, 100, 132}) {
        const int num_tiles = m_blocks * heads;
        std::vector<int> count(num_tiles, 0);
        for (const std::vector<int> &walk : pairTailWalks(num_tiles, m_blocks, ctas))
          for (int tile : walk) {
            ASSERT_GE(tile, 0);
            ASSERT_LT(tile, num_tiles);
            ++count[tile];
          }
        for (int t = 0; t < num_tiles; ++t)
          ASSERT_EQ(count[t], 1) << "m_blocks " << m_blocks << " heads " << heads << " ctas "
                                 << ctas << " tile " << t;
      }
}

TEST(PrefillTileOrderTest, PairTailShortensTheLastRound) {
  // Causal 16 x 1k at d128 (8 query blocks of 128, 16 heads): 1024 pairs of
  // 9 key blocks on 132 CTAs, 7 whole rounds and 100 pairs left. As pairs
  // the slowest CTA runs 8 x 9 = 72 key blocks; with the tail's single tiles
  // longest first, 7 x 9 + 8 = 71 (the longest tile alone).
  const int m_blocks = 8, num_tiles = m_blocks * 16 * 16, ctas = 132;
  const PrefillPairTail tail = prefillPairTail(num_tiles, m_blocks, ctas);
  EXPECT_EQ(tail.whole_tiles, 2 * 7 * 132);
  EXPECT_EQ(tail.tail_tiles, 200);
  int slowest = 0;
  for (const std::vector<int> &walk : pairTailWalks(num_tiles, m_blocks, ctas)) {
    int steps = 0;
    for (int tile : walk)
      steps += prefillQueryBlock(PrefillWalk::kMirroredPair, tile, m_blocks) + 1;
    slowest = std::max(slowest, steps);
  }
  EXPECT_EQ(slowest, 71);
  // An odd count of query blocks, or a CTA a pair: no tail.
  EXPECT_EQ(prefillPairTail(7 * 32, 7, 5).tail_tiles, 0);
  EXPECT_EQ(prefillPairTail(num_tiles, m_blocks, num_tiles / 2).tail_tiles, 0);
}

} // namespace
} // namespace txc::kernels
