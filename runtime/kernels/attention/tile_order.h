//===- tile_order.h - How the prefill kernel's CTAs walk their tiles ------===//
//
// A tile is (query block, query head, sequence); tile t belongs to the
// (head, sequence) t / m_blocks, whose m_blocks tiles are consecutive, so the
// CTAs running at once share that head's K/V in L2 (ordering the longest
// blocks of every head first instead read K/V from HBM once per tile and
// lost 10-15%, device run 38). A dynamic scheduler (tiles drawn from a
// global counter, handed to the warps through shared memory; commit
// a898f65) kept causal tiles together but its state spilled in the
// consumers' loop and lost 3-10% (runs 41-42). Plain host and device
// code: the warp-specialized prefill kernel and its launcher use it, CPU
// unit tests check it (test/unit/codegen/PrefillTileOrderTest.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#if defined(__CUDACC__)
#define TXC_TILE_ORDER_FN __host__ __device__ constexpr
#else
#define TXC_TILE_ORDER_FN constexpr
#endif

namespace txc::kernels {

/// - kPersistent (full masks): one CTA per SM on a fixed stride.
/// - kOneTile (windowed masks): causal tiles differ in length, and on a
///   fixed stride the CTAs drift apart over many heads whose K/V then no
///   longer share L2 (bench/RUNLOG.md, runs 38-42); one tile per CTA in the
///   hardware's block order is faster.
/// - kMirroredPair (causal): each CTA runs a query block and its mirror (the
///   longest with the shortest, ...), so every pair has the same work and
///   the second tile's K/V load under the first one's epilogue: +3..+13%
///   over kOneTile in the hardware's block order (device run 44). Pairs
///   also walk persistently: with equal work the CTAs on a fixed stride of
///   pairs stay in step, so the pairs running at once stay together (the
///   launcher picks one pair per CTA or one CTA per SM). Queries of 8192
///   and more take kOneTile again (launch_templates.cuh says why).
enum class PrefillWalk { kOneTile, kMirroredPair, kPersistent };

/// The query block of tile t: each head's longest first (causal diagonal
/// work first); paired, longest and shortest alternating (M-1, 0, M-2, 1,
/// ...), so tiles 2c and 2c + 1 are mirrors.
TXC_TILE_ORDER_FN int prefillQueryBlock(PrefillWalk walk, int t, int m_blocks) {
  const int q = t % m_blocks;
  if (walk == PrefillWalk::kMirroredPair)
    return q % 2 == 1 ? q / 2 : m_blocks - 1 - q / 2;
  return m_blocks - 1 - q;
}

/// The first tile of CTA `cta`.
TXC_TILE_ORDER_FN int prefillFirstTile(PrefillWalk walk, int cta) {
  return walk == PrefillWalk::kMirroredPair ? 2 * cta : cta;
}

/// The tile CTA runs after t, of `ctas` CTAs; num_tiles or more: none.
TXC_TILE_ORDER_FN int prefillTileAfter(PrefillWalk walk, int t, int ctas, int num_tiles) {
  return walk == PrefillWalk::kPersistent     ? t + ctas
         : walk == PrefillWalk::kMirroredPair ? (t % 2 == 0 ? t + 1 : t - 1 + 2 * ctas)
                                              : num_tiles;
}

/// The CTAs a launch of num_tiles tiles needs for one tile (or pair) per
/// CTA; a persistent launch caps it at one per SM.
TXC_TILE_ORDER_FN int prefillCtasFor(PrefillWalk walk, int num_tiles) {
  return walk == PrefillWalk::kMirroredPair ? (num_tiles + 1) / 2 : num_tiles;
}

/// The persistent mirrored pairs' last partial round, longest first: whole
/// rounds of pairs walk as usual, and the tiles of the rest are run one at
/// a time instead of as pairs, so every CTA gets work: CTA c runs tail
/// positions c and 2 ctas - 1 - c of the rest ordered longest first (each
/// pair's first tiles by head-local pair index ascending, then its second
/// tiles descending). With 1k queries (8 query blocks, pairs of 9 key
/// blocks) 100 pairs on 132 CTAs took 9 steps in the last round where the
/// longest single tile takes 8. Device run 278 (H100, bf16 d128, 16k
/// tokens): causal L1024 421 -> 439 TFLOP/s, L4096 593 -> 614 (+4.2% /
/// +3.5%, medians of four rounds), more than those key blocks predict (+1.4%).
/// Only with an even count of query blocks (a head's pairs then start at
/// multiples of m_blocks / 2).
struct PrefillPairTail {
  int whole_tiles, tail_tiles; // tail_tiles 0: no tail
};

TXC_TILE_ORDER_FN PrefillPairTail prefillPairTail(int num_tiles, int m_blocks, int ctas) {
  const int pairs = num_tiles / 2;
  if (m_blocks % 2 != 0 || ctas >= pairs)
    return PrefillPairTail{num_tiles, 0};
  const int whole_tiles = 2 * (pairs / ctas) * ctas;
  return PrefillPairTail{whole_tiles, num_tiles - whole_tiles};
}

/// The grid tile at position `pos` of a pair tail over pairs
/// [first_pair, end_pair) (see PrefillPairTail).
TXC_TILE_ORDER_FN int prefillPairTailTile(int pos, int first_pair, int end_pair, int m_blocks) {
  const int h = m_blocks / 2; // pairs of a head; pair p is its head's pair p % h
  auto below = [&](int x, int k) { return x > k ? (x - k + h - 1) / h : 0; }; // p < x, p % h == k
  auto nth = [&](int k, int i) { return first_pair + (k - first_pair % h + h) % h + i * h; };
  const int tail_pairs = end_pair - first_pair;
  const bool second = pos >= tail_pairs;
  int rest = second ? pos - tail_pairs : pos;
  for (int j = 0; j < h; ++j) {
    const int k = second ? h - 1 - j : j;
    const int n = below(end_pair, k) - below(first_pair, k);
    if (rest < n)
      return 2 * nth(k, rest) + (second ? 1 : 0);
    rest -= n;
  }
  return -1; // pos past the tail
}

/// The grid tile at walk index t of the mirrored-pair walk with `tail`
/// (walk indices whole_tiles + 2 c and + 1: CTA c's tail positions), or -1
/// for none. The walk's index space is whole_tiles + 2 ctas with a tail.
TXC_TILE_ORDER_FN int prefillPairWalkTile(int t, PrefillPairTail tail, int ctas, int m_blocks) {
  if (tail.tail_tiles == 0 || t < tail.whole_tiles)
    return t;
  const int local = t - tail.whole_tiles, c = local / 2;
  const int pos = local % 2 == 0 ? c : 2 * ctas - 1 - c;
  if (pos >= tail.tail_tiles)
    return -1;
  return prefillPairTailTile(pos, tail.whole_tiles / 2, (tail.whole_tiles + tail.tail_tiles) / 2,
                             m_blocks);
}

/// A CTA's part of the persistent walk's stream-K tail: the last partial
/// round's `tail_tiles` tiles of `steps` key-block steps each (tile j's step
/// s is tail step j * steps + s) are shared out as contiguous ranges,
/// CTA c's [c * total / ctas, (c + 1) * total / ctas), so a range covers at
/// most two tiles: part 0 from the range's start, part 1 (if any) from the
/// next tile's step 0. A part runs tail tile `tile` (-1: no such part),
/// steps [s_begin, s_begin + count). The part holding a tile's step 0 owns
/// it: it merges `merges` parts, one each of the CTAs after it, all of them
/// their CTA's part 0 and none an owner, so no owner waits on a waiter.
/// Those are CTAs cta + 1 ... cta + merges: with fewer steps than CTAs
/// (where a range could be empty) each of the first tail_tiles CTAs runs a
/// whole tile instead.
struct PrefillTailPart {
  int tile, s_begin, count, merges;
};

TXC_TILE_ORDER_FN PrefillTailPart prefillTailPart(int cta, int index, int ctas, int tail_tiles, int steps) {
  const PrefillTailPart none{-1, 0, 0, 0};
  const long long total = (long long)tail_tiles * steps;
  if (total < ctas)
    return index == 0 && cta < tail_tiles ? PrefillTailPart{cta, 0, steps, 0} : none;
  auto rangeStart = [&](int c) { return (long long)c * total / ctas; };
  const long long a = rangeStart(cta), b = rangeStart(cta + 1);
  const long long from = index == 0 ? a : (a / steps + 1) * steps;
  if (from >= b)
    return none;
  const int j = (int)(from / steps);
  const long long tile_end = (long long)(j + 1) * steps;
  PrefillTailPart part{j, (int)(from - (long long)j * steps), (int)((b < tile_end ? b : tile_end) - from), 0};
  if (part.s_begin == 0)
    for (int c = cta + 1; c < ctas && rangeStart(c) < tile_end; ++c)
      ++part.merges;
  return part;
}

} // namespace txc::kernels

#undef TXC_TILE_ORDER_FN
