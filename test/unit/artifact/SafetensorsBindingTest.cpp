//===- SafetensorsBindingTest.cpp - --weights DIR with real checkpoints ---===//
#include "ArtifactTestUtil.h"

#include "runtime/safetensors/Checkpoint.h"
#include "txc/artifact/Artifact.h"

#include <gtest/gtest.h>

#include <cstring>

namespace txc::artifact {
namespace {

const std::string kFixtures = std::string(TXC_SOURCE_DIR) + "/test/fixtures/";

// A weight-stripped artifact whose manifest lists every tensor of the
// checkpoint in `model_dir`, as `txc compile --no-weights` would.
std::string writeStrippedFor(const std::string &model_dir) {
  auto checkpoint = Checkpoint::open(model_dir);
  EXPECT_TRUE(checkpoint.isOk()) << checkpoint.status().toString();
  pb::Artifact message = testing::makeMessage();
  message.clear_plans();
  ArtifactWriter writer(message);
  for (const CheckpointTensor &tensor : checkpoint->tensors())
    EXPECT_TRUE(writer.addExternalWeight(tensor.name(), tensor.dtype(), tensor.shape()).isOk());
  std::string path = testing::tempPath("stripped-fixture.txm");
  EXPECT_TRUE(writer.write(path).isOk());
  return path;
}

TEST(SafetensorsBindingTest, StrippedArtifactBindsItsCheckpointDirectory) {
  std::string model_dir = kFixtures + "tiny-qwen3";
  std::string path = writeStrippedFor(model_dir);
  LoadOptions options;
  options.weights_dir = model_dir;
  auto loaded = LoadedArtifact::load(path, options);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  EXPECT_EQ((*loaded)->weightOrigin().rfind("safetensors checkpoint ", 0), 0u);

  auto checkpoint = Checkpoint::open(model_dir);
  ASSERT_TRUE(checkpoint.isOk());
  ASSERT_EQ((*loaded)->weights().size(), checkpoint->tensors().size());
  ASSERT_FALSE(checkpoint->tensors().empty());
  for (const CheckpointTensor &tensor : checkpoint->tensors()) {
    const BoundWeight *bound = (*loaded)->findWeight(tensor.name());
    ASSERT_NE(bound, nullptr) << tensor.name();
    ASSERT_EQ(bound->bytes, tensor.byteSize());
    EXPECT_EQ(std::memcmp(bound->data, tensor.data(), bound->bytes), 0) << tensor.name();
  }
}

TEST(SafetensorsBindingTest, AnotherModelsCheckpointIsRejectedByName) {
  std::string path = writeStrippedFor(kFixtures + "tiny-qwen3");
  LoadOptions options;
  options.weights_dir = kFixtures + "tiny-llama"; // no q_norm/k_norm tensors
  auto loaded = LoadedArtifact::load(path, options);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(loaded.status().message().find("is missing from safetensors checkpoint"),
            std::string::npos)
      << loaded.status().message();
}

} // namespace
} // namespace txc::artifact
