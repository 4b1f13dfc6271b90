//===- Hash.cpp - XXH64 ---------------------------------------------------===//
//
// A straight transcription of the XXH64 specification
// (github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md), little-endian
// reads via memcpy so unaligned input is fine.
//
//===----------------------------------------------------------------------===//
#include "txc/artifact/Hash.h"

#include <cstring>

namespace txc::artifact {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline uint64_t read64(const unsigned char *p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v; // txc supports little-endian hosts only (x86-64, aarch64)
}

inline uint32_t read32(const unsigned char *p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t round(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  acc = rotl(acc, 31);
  return acc * kPrime1;
}

inline uint64_t mergeRound(uint64_t acc, uint64_t lane) {
  acc ^= round(0, lane);
  return acc * kPrime1 + kPrime4;
}

// Consumes the tail (< 32 bytes) and avalanches.
uint64_t finish(uint64_t acc, const unsigned char *p, size_t len) {
  while (len >= 8) {
    acc ^= round(0, read64(p));
    acc = rotl(acc, 27) * kPrime1 + kPrime4;
    p += 8;
    len -= 8;
  }
  if (len >= 4) {
    acc ^= static_cast<uint64_t>(read32(p)) * kPrime1;
    acc = rotl(acc, 23) * kPrime2 + kPrime3;
    p += 4;
    len -= 4;
  }
  while (len > 0) {
    acc ^= (*p) * kPrime5;
    acc = rotl(acc, 11) * kPrime1;
    ++p;
    --len;
  }
  acc ^= acc >> 33;
  acc *= kPrime2;
  acc ^= acc >> 29;
  acc *= kPrime3;
  acc ^= acc >> 32;
  return acc;
}

uint64_t mergeLanes(const uint64_t lanes[4]) {
  uint64_t acc = rotl(lanes[0], 1) + rotl(lanes[1], 7) + rotl(lanes[2], 12) +
                 rotl(lanes[3], 18);
  for (int i = 0; i < 4; ++i)
    acc = mergeRound(acc, lanes[i]);
  return acc;
}

void initLanes(uint64_t lanes[4], uint64_t seed) {
  lanes[0] = seed + kPrime1 + kPrime2;
  lanes[1] = seed + kPrime2;
  lanes[2] = seed;
  lanes[3] = seed - kPrime1;
}

inline void consumeStripe(uint64_t lanes[4], const unsigned char *p) {
  lanes[0] = round(lanes[0], read64(p));
  lanes[1] = round(lanes[1], read64(p + 8));
  lanes[2] = round(lanes[2], read64(p + 16));
  lanes[3] = round(lanes[3], read64(p + 24));
}

} // namespace

uint64_t xxh64(const void *data, size_t size, uint64_t seed) {
  Xxh64Stream stream(seed);
  stream.update(data, size);
  return stream.digest();
}

Xxh64Stream::Xxh64Stream(uint64_t seed) : seed_(seed) {
  initLanes(lanes_, seed);
}

void Xxh64Stream::update(const void *data, size_t size) {
  const auto *p = static_cast<const unsigned char *>(data);
  total_bytes_ += size;
  if (buffered_ > 0) {
    size_t take = 32 - buffered_ < size ? 32 - buffered_ : size;
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    size -= take;
    if (buffered_ < 32)
      return;
    consumeStripe(lanes_, buffer_);
    buffered_ = 0;
  }
  while (size >= 32) {
    consumeStripe(lanes_, p);
    p += 32;
    size -= 32;
  }
  if (size > 0) {
    std::memcpy(buffer_, p, size);
    buffered_ = size;
  }
}

uint64_t Xxh64Stream::digest() const {
  uint64_t acc = total_bytes_ >= 32 ? mergeLanes(lanes_) : seed_ + kPrime5;
  acc += total_bytes_;
  return finish(acc, buffer_, buffered_);
}

} // namespace txc::artifact
