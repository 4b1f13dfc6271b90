//===- CheckpointTest.cpp - Single files, sharded sets, real checkpoints --===//

#include "runtime/safetensors/Checkpoint.h"
#include "test/unit/safetensors/SafetensorsTestFiles.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <sys/stat.h>

namespace txc {
namespace {

using testing::FakeTensor;
using testing::ScratchDirectory;

const std::string kFixtures = std::string(TXC_SOURCE_DIR) + "/test/fixtures";
const std::string kStories260K = std::string(TXC_SOURCE_DIR) + "/../shared/models/stories260K";

/// A two-shard set: embed + layer 0 in shard 1, layer 1 + norm in shard 2.
struct ShardedSet {
  ScratchDirectory scratch{"sharded"};
  std::vector<FakeTensor> shard1 = {{"embed", "BF16", {8, 4}}, {"layer0", "F16", {4, 4}}};
  std::vector<FakeTensor> shard2 = {{"layer1", "BF16", {4, 4}}, {"norm", "F32", {4}}};
  nlohmann::json index = {{"metadata", {{"total_size", 112}}},
                          {"weight_map",
                           {{"embed", "model-00001-of-00002.safetensors"},
                            {"layer0", "model-00001-of-00002.safetensors"},
                            {"layer1", "model-00002-of-00002.safetensors"},
                            {"norm", "model-00002-of-00002.safetensors"}}}};

  void write() {
    testing::writeSafetensors(scratch.file("model-00001-of-00002.safetensors"), shard1);
    testing::writeSafetensors(scratch.file("model-00002-of-00002.safetensors"), shard2);
    testing::writeBytes(scratch.file(kSafetensorsIndexName), index.dump());
  }
  std::string indexPath() const { return scratch.file(kSafetensorsIndexName); }
};

std::string errorOf(const StatusOr<Checkpoint> &result) {
  EXPECT_FALSE(result.isOk());
  if (result.isOk())
    return "";
  EXPECT_EQ(result.status().message().find('\n'), std::string::npos);
  return result.status().message();
}

TEST(Checkpoint, OpensTheTinyLlamaFixture) {
  auto checkpoint = Checkpoint::open(kFixtures + "/tiny-llama");
  ASSERT_TRUE(checkpoint.isOk()) << checkpoint.status().toString();
  EXPECT_EQ(checkpoint->source(), kFixtures + "/tiny-llama/model.safetensors");
  EXPECT_EQ(checkpoint->tensors().size(), 21u); // 2 layers x 9 + embed, norm, head
  const CheckpointTensor *q = checkpoint->find("model.layers.1.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype(), DType::kBF16);
  EXPECT_EQ(q->shape(), (std::vector<int64_t>{128, 64})); // 4 heads x 32
  EXPECT_EQ(q->byteSize(), 128u * 64 * 2);
  // The norm weights were drawn from [0.6, 1.4]: read one back as bf16.
  const CheckpointTensor *norm = checkpoint->find("model.norm.weight");
  ASSERT_NE(norm, nullptr);
  uint16_t bits;
  std::memcpy(&bits, norm->data(), 2);
  uint32_t widened = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &widened, 4);
  EXPECT_GE(value, 0.6f);
  EXPECT_LE(value, 1.4f);
}

TEST(Checkpoint, OpensEveryFixtureInBF16) {
  for (const char *name : {"tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3"}) {
    auto checkpoint = Checkpoint::open(kFixtures + "/" + name);
    ASSERT_TRUE(checkpoint.isOk()) << checkpoint.status().toString();
    for (const CheckpointTensor &tensor : checkpoint->tensors())
      EXPECT_EQ(tensor.dtype(), DType::kBF16) << name << " " << tensor.name();
  }
}

TEST(Checkpoint, OpensStories260KInF32) {
  struct stat info;
  if (::stat(kStories260K.c_str(), &info) != 0)
    GTEST_SKIP() << kStories260K << " is not on this machine";
  auto checkpoint = Checkpoint::open(kStories260K);
  ASSERT_TRUE(checkpoint.isOk()) << checkpoint.status().toString();
  const CheckpointTensor *embed = checkpoint->find("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->dtype(), DType::kF32);
  EXPECT_EQ(embed->shape(), (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(checkpoint->find("lm_head.weight"), nullptr); // tied
}

TEST(Checkpoint, OpensAShardedSetFromItsDirectoryOrIndex) {
  ShardedSet set;
  set.write();
  for (const std::string &path : {set.scratch.path(), set.indexPath()}) {
    auto checkpoint = Checkpoint::open(path);
    ASSERT_TRUE(checkpoint.isOk()) << checkpoint.status().toString();
    EXPECT_EQ(checkpoint->files().size(), 2u);
    ASSERT_EQ(checkpoint->tensors().size(), 4u);
    EXPECT_EQ(checkpoint->tensors()[0].name(), "embed");
    EXPECT_EQ(checkpoint->find("norm")->filePath(),
              set.scratch.file("model-00002-of-00002.safetensors"));
    EXPECT_EQ(checkpoint->find("layer0")->dtype(), DType::kF16);
    EXPECT_EQ(checkpoint->find("absent"), nullptr);
  }
}

TEST(Checkpoint, SurvivesBeingMoved) {
  ShardedSet set;
  set.write();
  auto opened = Checkpoint::open(set.scratch.path());
  ASSERT_TRUE(opened.isOk());
  Checkpoint moved = std::move(opened.value());
  EXPECT_EQ(moved.find("layer1")->shape(), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(static_cast<uint8_t>(moved.find("layer1")->data()[0]), 1u);
}

TEST(Checkpoint, ReportsADirectoryWithoutWeights) {
  ScratchDirectory scratch("empty");
  auto checkpoint = Checkpoint::open(scratch.path());
  EXPECT_NE(errorOf(checkpoint)
                .find("neither model.safetensors nor "
                      "model.safetensors.index.json"),
            std::string::npos);
  EXPECT_EQ(checkpoint.status().code(), StatusCode::kNotFound);
}

TEST(Checkpoint, ReportsAMissingShardWithATensorItHolds) {
  ShardedSet set;
  set.write();
  ASSERT_EQ(std::remove(set.scratch.file("model-00002-of-00002.safetensors").c_str()), 0);
  EXPECT_NE(errorOf(Checkpoint::open(set.scratch.path()))
                .find("model.safetensors.index.json: tensor 'layer1': its "
                      "shard 'model-00002-of-00002.safetensors' does not "
                      "exist"),
            std::string::npos);
}

TEST(Checkpoint, ReportsATensorInTheWrongShard) {
  ShardedSet set;
  set.index["weight_map"]["norm"] = "model-00001-of-00002.safetensors";
  set.write();
  std::string message = errorOf(Checkpoint::open(set.scratch.path()));
  EXPECT_NE(message.find("model-00002-of-00002.safetensors: tensor 'norm' is "
                         "here but the index puts it in "
                         "'model-00001-of-00002.safetensors'"),
            std::string::npos)
      << message;
}

TEST(Checkpoint, ReportsATensorTheIndexDoesNotList) {
  ShardedSet set;
  set.index["weight_map"].erase("layer0");
  set.write();
  EXPECT_NE(errorOf(Checkpoint::open(set.scratch.path()))
                .find("model-00001-of-00002.safetensors: tensor 'layer0' is "
                      "not listed in"),
            std::string::npos);
}

TEST(Checkpoint, ReportsAnIndexedTensorItsShardLacks) {
  ShardedSet set;
  set.index["weight_map"]["ghost"] = "model-00002-of-00002.safetensors";
  set.write();
  EXPECT_NE(errorOf(Checkpoint::open(set.scratch.path()))
                .find("tensor 'ghost': the index puts it in "
                      "'model-00002-of-00002.safetensors', which does not "
                      "hold it"),
            std::string::npos);
}

TEST(Checkpoint, ReportsAShardThatIsItselfBroken) {
  ShardedSet set;
  set.write();
  testing::writeBytes(set.scratch.file("model-00002-of-00002.safetensors"), "short");
  EXPECT_NE(errorOf(Checkpoint::open(set.scratch.path()))
                .find("model-00002-of-00002.safetensors: 5 bytes, too short"),
            std::string::npos);
}

TEST(Checkpoint, RefusesShardPathsOutsideTheDirectory) {
  for (const char *shard : {"../model.safetensors", "/etc/passwd", "", ".."}) {
    ShardedSet set;
    set.index["weight_map"]["norm"] = shard;
    set.write();
    EXPECT_NE(errorOf(Checkpoint::open(set.scratch.path()))
                  .find("is not a file name in the index's directory"),
              std::string::npos)
        << shard;
  }
}

TEST(ShardIndex, RejectsMalformedIndexes) {
  auto errorOfIndex = [](const std::string &text) {
    auto result = parseShardIndex(text, "index.json");
    EXPECT_FALSE(result.isOk()) << text;
    return result.isOk() ? "" : result.status().message();
  };
  EXPECT_NE(errorOfIndex("{\"weight_map\": {").find("index.json: invalid JSON"), std::string::npos);
  EXPECT_NE(errorOfIndex("[]").find("index is JSON but not an object"), std::string::npos);
  EXPECT_NE(errorOfIndex("{\"metadata\": {}}").find("missing or non-object \"weight_map\""),
            std::string::npos);
  EXPECT_NE(errorOfIndex("{\"weight_map\": {}}").find("lists no tensors"), std::string::npos);
  EXPECT_NE(errorOfIndex("{\"weight_map\": {\"a\": 3}}").find("tensor 'a': shard is not a string"),
            std::string::npos);
  EXPECT_NE(
      errorOfIndex("{\"weight_map\": {\"a\": \"x\", \"a\": \"y\"}}").find("key 'a' appears twice"),
      std::string::npos);
}

} // namespace
} // namespace txc
