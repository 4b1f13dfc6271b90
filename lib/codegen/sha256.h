//===- sha256.h - SHA-256 for content-addressed caches --------------------===//
//
// The cubin cache is keyed by the hash of everything that determines the
// compiled bytes; a strong hash makes a stale hit practically impossible.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace txc::codegen {

class Sha256 {
public:
  Sha256();
  void update(std::string_view bytes);
  /// Lower-case hex digest; the object must not be updated afterwards.
  std::string hexDigest();

private:
  void compressBlock(const unsigned char *block);
  uint32_t state_[8];
  unsigned char buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256Hex(std::string_view bytes);

} // namespace txc::codegen
