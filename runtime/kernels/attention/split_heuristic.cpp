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
  // One split fewer where the grid would fill every slot: its last blocks
  // then start only as the launch before's mergers (one a (sequence, kv
  // head), ~2-3 us after the other CTAs) leave, and end late. The sweep
  // (device run 286, H100, graph + PDL + early K/V): b1 L32768 33 -> 32
  // splits 48.7 -> 47.2 us, b1 L16384 27.3 -> 25.3, b3 L8192 11 -> 10 37.3 ->
  // 36.3; where slots stay free anyway one fewer lost (b2 L8192 16 -> 15 +1.5%,
  // b4 8 -> 7 +4%). Shortening only the last split's chunk (run 285) gained
  // half as much.
  int fit = (int)std::max(1LL, resident_ctas / base_ctas);
  if (fit >= 8 && fit * base_ctas == resident_ctas)
    --fit;
  int splits = std::max(std::min(fit, cap), floor);
  // Not fewer, longer chunks where K/V go before the PDL wait, though back
  // to back they read faster: b1 L4096 at 22 splits (three-tile chunks
  // loaded whole before the wait) 8.45 us against 32's 9.2 (device run 289,
  // H100, attention launches in a row). In the decode step the launch
  // before is the short QKV GEMV, and there that rule cost 1.0-1.3 us a
  // layer (runs 291-292: the wait released 1.6-2.1 us later after the
  // GEMV's exit; Qwen3-0.6B / Llama-3-8B b1 at 3.5k keys 0.869 / 5.679 ms a
  // step at 32 splits against 0.901 / 5.704 at the rule's 19-22).
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
