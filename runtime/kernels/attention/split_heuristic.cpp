//===- split_heuristic.cpp - Choosing the split-KV factor of decode -------===//
#include "attention/split_heuristic.h"

#include <algorithm>

namespace txc::kernels {

int chooseDecodeSplits(const DecodeSplitInputs &in) {
  const long long base_ctas = (long long)std::max(in.batch, 1) * std::max(in.num_kv_heads, 1);
  const long long resident_ctas = (long long)std::max(in.num_sms, 1) * std::max(in.ctas_per_sm, 1);
  const int min_chunk = std::max(in.min_tokens_per_split, 1);
  const int max_by_length = std::max(1, in.max_kv_len / min_chunk);
  const int cap = std::max(1, std::min(in.max_splits, max_by_length));
  const int floor = std::max(1, std::min(in.min_splits, cap));

  // The most splits whose grid fits one wave of resident CTAs. A grid that
  // spills a few CTAs past a wave runs a second, almost empty wave of whole
  // chunks, and two exact waves read slower than one (attention_bench's split
  // sweep, run 246: one wave 84-98% of copy at batches 2-24, a spill of 8-120
  // CTAs 57-88%, two waves 65-92%).
  //
  // One split fewer where that costs at most an eighth of them: a grid that
  // fills every slot starts its last blocks only as the launch before's
  // last CTAs leave (each (sequence, kv head)'s merger, ~3 us after the
  // others), so they end late; one slot left for each merger lets every
  // block in at once. Device run 285 (H100, b1 L32768, graph + PDL + early
  // K/V): 33 splits 47.6-48.0 us, 32 splits 45.9 (92.8% -> 96.4% of copy);
  // the last split's chunk shortened instead reached only 46.8.
  int fit = (int)std::max(1LL, resident_ctas / base_ctas);
  if (fit >= 8)
    --fit; // (resident - base) / base: a slot left for each merger
  int splits = std::max(std::min(fit, cap), floor);
  // Past a wave unsplit, the same arithmetic: the split of at most
  // kMaxSplitsPastAWave with the fewest waves a chunk, where it cuts them by
  // a tenth (a split's merge costs a little). An unsplit grid just past a
  // wave runs a second wave of whole contexts on a few SMs: the sweep past a
  // wave (run 254, H100, L4096) read b34 70% of copy unsplit against 93% at
  // 4 splits, b40 81% against 98% (4), b48 96% against 101% (2); b64 and
  // b256 (1.94 and 7.76 waves, ~100% unsplit) gain nothing and stay unsplit.
  // (The decode step plans for its CUDA graph's batch bucket, padding rows
  // of one token included: with buckets of 32, b40 ran as 64, unsplit (run
  // 257); with buckets of 8 it runs as 40 at 4 splits: Qwen3-0.6B b40 with
  // 3500-token prompts 8.80 -> 7.40 ms a step, run 260, H100.)
  if (base_ctas > resident_ctas && floor == 1) {
    constexpr int kMaxSplitsPastAWave = 4;
    auto wavesPerChunk = [&](int s) {
      return (double)((base_ctas * s + resident_ctas - 1) / resident_ctas) / s;
    };
    const double unsplit = wavesPerChunk(1);
    double best = unsplit;
    for (int s = 2; s <= std::min(cap, kMaxSplitsPastAWave); ++s)
      if (wavesPerChunk(s) < best) {
        best = wavesPerChunk(s);
        splits = s;
      }
    if (best > 0.9 * unsplit)
      splits = 1;
  }
  // Even out the chunks: the same number of waves with equal-length chunks.
  if (splits > 1) {
    const int chunk = (in.max_kv_len + splits - 1) / splits;
    splits = (in.max_kv_len + chunk - 1) / chunk;
  }
  return std::max(splits, 1);
}

} // namespace txc::kernels
