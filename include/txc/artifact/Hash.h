//===- Hash.h - XXH64 for artifact and weight checksums --------*- C++ -*-===//
//
// XXH64 (Yann Collet's xxHash, 64-bit variant) because it runs at memory
// bandwidth on one core, so checking a multi-gigabyte weight blob at load is
// affordable, and because its published test vectors let anyone recompute
// an artifact's checksums with stock tools (`xxhsum -H64`).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ARTIFACT_HASH_H
#define TXC_ARTIFACT_HASH_H

#include <cstddef>
#include <cstdint>

namespace txc::artifact {

/// XXH64 of [data, data + size) with the given seed.
uint64_t xxh64(const void *data, size_t size, uint64_t seed = 0);

/// Incremental XXH64 for data written in pieces (the writer streams the
/// blob); update() in any split gives the same digest as one xxh64 call.
class Xxh64Stream {
public:
  explicit Xxh64Stream(uint64_t seed = 0);
  void update(const void *data, size_t size);
  uint64_t digest() const;

private:
  uint64_t lanes_[4];
  uint64_t seed_;
  uint64_t total_bytes_ = 0;
  unsigned char buffer_[32];
  size_t buffered_ = 0;
};

} // namespace txc::artifact

#endif // TXC_ARTIFACT_HASH_H
