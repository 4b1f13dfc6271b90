//===- Sha256Test.cpp - SHA-256 against FIPS 180-4 test vectors -----------===//
#include <gtest/gtest.h>

#include <string>

#include "lib/codegen/sha256.h"

using txc::codegen::Sha256;
using txc::codegen::sha256Hex;

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  const std::string text = "the quick brown fox jumps over the lazy dog, several blocks long " + std::string(200, 'x');
  for (size_t cut : {0ul, 1ul, 55ul, 56ul, 63ul, 64ul, 65ul, 200ul}) {
    Sha256 h;
    h.update(std::string_view(text).substr(0, cut));
    h.update(std::string_view(text).substr(cut));
    EXPECT_EQ(h.hexDigest(), sha256Hex(text)) << "cut at " << cut;
  }
}
