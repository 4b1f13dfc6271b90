//===- split_heuristic.h - Choosing the split-KV factor of decode ---------===//
//
// Decode launches batch * kv_heads * num_splits CTAs. With few sequences and
// kv heads (batch 1, 8 kv heads) that is far fewer CTAs than the GPU holds,
// and one CTA cannot pull more than a fraction of the memory bandwidth. The
// split cuts each sequence's keys into chunks so that the grid fills one wave
// of resident CTAs without spilling into a second (and without taking every
// slot, which the launch before's last CTAs may still hold), but never below
// a minimum chunk, because every split costs a partial output write and a
// merge. Pure host code: the compiler calls it when it picks the tactic of a
// decode launch, and CPU unit tests check it.
//
//===----------------------------------------------------------------------===//
#pragma once

namespace txc::kernels {

struct DecodeSplitInputs {
  int batch = 1;
  int num_kv_heads = 1;
  int max_kv_len = 0;        // longest context in the batch, in tokens
  int num_sms = 132;
  int ctas_per_sm = 1;       // occupancy of the decode kernel
  int min_tokens_per_split = 128;
  int max_splits = 128;
  // At least this many splits where the chunks stay min_tokens_per_split
  // long, also when the grid already fills a wave (short contexts at larger
  // batches, where each CTA's chain of key tiles is the latency).
  int min_splits = 1;
};

/// Returns the number of splits (>= 1).
int chooseDecodeSplits(const DecodeSplitInputs &in);

} // namespace txc::kernels
