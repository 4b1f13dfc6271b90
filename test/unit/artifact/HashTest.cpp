//===- HashTest.cpp - XXH64 against published vectors ---------------------===//
#include "txc/artifact/Hash.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace txc::artifact {
namespace {

TEST(Xxh64Test, MatchesPublishedVectors) {
  // From the xxHash specification and python-xxhash's README.
  EXPECT_EQ(xxh64("", 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(xxh64("abc", 3), 0x44BC2CF5AD770999ULL);
  std::string spam = "Nobody inspects the spammish repetition"; // > 32 bytes
  EXPECT_EQ(xxh64(spam.data(), spam.size()), 0xFBCEA83C8A378BF1ULL);
}

TEST(Xxh64Test, SeedChangesTheDigest) {
  EXPECT_NE(xxh64("abc", 3, 0), xxh64("abc", 3, 1));
}

TEST(Xxh64Test, StreamingInAnySplitEqualsOneShot) {
  std::vector<unsigned char> data(1000);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<unsigned char>(i * 37 + 11);
  for (size_t total : {0u, 5u, 31u, 32u, 33u, 64u, 100u, 1000u}) {
    uint64_t expected = xxh64(data.data(), total, 42);
    for (size_t piece : {1u, 3u, 7u, 32u, 33u, 500u}) {
      Xxh64Stream stream(42);
      for (size_t at = 0; at < total; at += piece)
        stream.update(data.data() + at, std::min(piece, total - at));
      EXPECT_EQ(stream.digest(), expected) << "total " << total << " piece " << piece;
    }
  }
}

} // namespace
} // namespace txc::artifact
