//===- ArtifactErrorTest.cpp - Each bad artifact gets its own message -----===//
#include "ArtifactTestUtil.h"

#include "txc/artifact/Artifact.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace txc::artifact {
namespace {

using testing::readFile;
using testing::tempPath;
using testing::writeEmbeddedArtifact;
using testing::writeFile;

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

class ArtifactErrorTest : public ::testing::Test {
protected:
  void SetUp() override {
    good_path_ = tempPath("good.txm");
    ASSERT_TRUE(writeEmbeddedArtifact(good_path_).isOk());
    good_ = readFile(good_path_);
    ASSERT_TRUE(LoadedArtifact::load(good_path_).isOk());
  }

  // Writes `bytes` to a new file and loads it; the load must fail.
  Status loadBytes(const std::vector<unsigned char> &bytes,
                   const std::string &stem) {
    last_path_ = tempPath(stem);
    writeFile(last_path_, bytes);
    auto loaded = LoadedArtifact::load(last_path_);
    EXPECT_FALSE(loaded.isOk()) << stem << " loaded";
    return loaded.isOk() ? Status::ok() : loaded.status();
  }

  ArtifactHeader goodHeader() {
    auto header = decodeArtifactHeader(good_.data(), good_.size(), good_path_);
    EXPECT_TRUE(header.isOk());
    return *header;
  }

  std::string good_path_, last_path_;
  std::vector<unsigned char> good_;
};

TEST_F(ArtifactErrorTest, MissingFile) {
  std::string path = tempPath("absent.txm");
  auto loaded = LoadedArtifact::load(path);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(loaded.status().message(), path));
}

TEST_F(ArtifactErrorTest, WrongMagic) {
  std::vector<unsigned char> bytes = good_;
  std::memcpy(bytes.data(), "GGUF", 4);
  Status status = loadBytes(bytes, "magic.txm");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(status.message(), last_path_ + ": not a txc artifact (wrong magic"))
      << status.message();
  // A text file that merely starts differently is the same error.
  status = loadBytes({'{', '"', 'a', '"', '}'}, "json.txm");
  EXPECT_TRUE(contains(status.message(), "wrong magic")) << status.message();
}

TEST_F(ArtifactErrorTest, TruncatedAnywhere) {
  ArtifactHeader header = goodHeader();
  struct Cut {
    size_t length;
    const char *expected;
  } cuts[] = {
      {0, "0 bytes, shorter than the 64-byte header"},
      {5, "5 bytes, shorter than the 64-byte header"},
      {40, "40 bytes, shorter than the 64-byte header"},
      {static_cast<size_t>(header.message_offset + header.message_bytes / 2),
       "but the header says the message ends at byte"},
      {static_cast<size_t>(header.blob_offset + header.blob_bytes - 1),
       "but the header says the weight blob ends at byte"},
  };
  for (const Cut &cut : cuts) {
    std::vector<unsigned char> bytes(good_.begin(), good_.begin() + cut.length);
    Status status = loadBytes(bytes, "cut" + std::to_string(cut.length) + ".txm");
    EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status.message();
    EXPECT_TRUE(contains(status.message(), last_path_ + ": truncated: "))
        << status.message();
    EXPECT_TRUE(contains(status.message(), cut.expected)) << status.message();
  }
}

TEST_F(ArtifactErrorTest, NewerFormatVersion) {
  ArtifactHeader header = goodHeader();
  header.format_version = kArtifactFormatVersion + 1;
  std::vector<unsigned char> bytes = good_;
  encodeArtifactHeader(header, bytes.data());
  Status status = loadBytes(bytes, "newer.txm");
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(status.message(),
            last_path_ + ": format version " +
                std::to_string(kArtifactFormatVersion + 1) +
                " is newer than this reader supports (" +
                std::to_string(kArtifactFormatVersion) +
                "); use a newer txc or recompile the model");
}

TEST_F(ArtifactErrorTest, CorruptHeaderField) {
  std::vector<unsigned char> bytes = good_;
  bytes[30] ^= 0x01; // inside message_bytes; the header checksum catches it
  Status status = loadBytes(bytes, "header.txm");
  EXPECT_TRUE(contains(status.message(), "header checksum mismatch")) << status.message();
}

TEST_F(ArtifactErrorTest, ContentHashMismatch) {
  // Change one character of the tokenizer JSON: the message still parses,
  // only the content hash notices.
  std::vector<unsigned char> bytes = good_;
  const std::string needle = "\"BPE\"";
  auto at = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  ASSERT_NE(at, bytes.end());
  at[1] = 'C';
  Status status = loadBytes(bytes, "hash.txm");
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(status.message(), last_path_ + ": content hash mismatch"))
      << status.message();
}

TEST_F(ArtifactErrorTest, CorruptMessage) {
  ArtifactHeader header = goodHeader();
  std::vector<unsigned char> bytes = good_;
  // 0xFF bytes form an invalid varint tag run: the message cannot parse.
  std::fill(bytes.begin() + header.message_offset,
            bytes.begin() + header.message_offset + 16, 0xFF);
  Status status = loadBytes(bytes, "garbled.txm");
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(status.message(), "does not parse")) << status.message();
}

TEST_F(ArtifactErrorTest, CorruptWeightBlob) {
  ArtifactHeader header = goodHeader();
  std::vector<unsigned char> bytes = good_;
  bytes[header.blob_offset + 3] ^= 0x40; // inside the first weight
  Status status = loadBytes(bytes, "blob.txm");
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(status.message(), last_path_ +
                                             ": weight 'model.embed_tokens.weight' "
                                             "checksum mismatch"))
      << status.message();

  // Skipping the check is the caller's explicit choice.
  LoadOptions unchecked;
  unchecked.verify_weight_checksums = false;
  EXPECT_TRUE(LoadedArtifact::load(last_path_, unchecked).isOk());
}

TEST_F(ArtifactErrorTest, EachFaultHasItsOwnMessage) {
  ArtifactHeader header = goodHeader();
  std::vector<std::vector<unsigned char>> faulty;
  faulty.push_back(good_);
  faulty.back()[0] = 'X';
  faulty.emplace_back(good_.begin(), good_.begin() + header.message_offset + 3);
  ArtifactHeader newer = header;
  newer.format_version += 1;
  faulty.push_back(good_);
  encodeArtifactHeader(newer, faulty.back().data());
  faulty.push_back(good_);
  faulty.back()[header.blob_offset] ^= 1;
  std::vector<std::string> messages;
  for (size_t i = 0; i < faulty.size(); ++i) {
    Status status = loadBytes(faulty[i], "fault" + std::to_string(i) + ".txm");
    std::string message = status.message();
    message.erase(0, last_path_.size()); // paths differ; compare the rest
    messages.push_back(message);
  }
  std::sort(messages.begin(), messages.end());
  EXPECT_EQ(std::unique(messages.begin(), messages.end()), messages.end());
}

} // namespace
} // namespace txc::artifact
