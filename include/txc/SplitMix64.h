//===- SplitMix64.h - A counter-based 64-bit mix ---------------*- C++ -*-===//
//
// splitmix64's finalizer: a bijective mix, so distinct counters never
// collide and neighbouring counters give unrelated outputs. The random
// weights (artifact) and the sampler's per-step uniforms (engine) are
// counter-based with it, so a seed gives the same values whatever the
// thread count or backend.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_SPLITMIX64_H
#define TXC_SPLITMIX64_H

#include <cstdint>

namespace txc {

inline uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

} // namespace txc

#endif // TXC_SPLITMIX64_H
