//===- CheckpointCheckTest.cpp - Weights against config.json --------------===//

#include "lib/frontend/CheckpointCheck.h"
#include "lib/frontend/ConfigParser.h"
#include "test/unit/safetensors/SafetensorsTestFiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sys/stat.h>

namespace txc::frontend {
namespace {

using txc::testing::FakeTensor;
using txc::testing::ScratchDirectory;

const std::string kFixtures = std::string(TXC_SOURCE_DIR) + "/test/fixtures";

ModelConfig fixtureConfig(const std::string &name) {
  auto config = loadModelConfig(kFixtures + "/" + name + "/config.json");
  EXPECT_TRUE(config.isOk()) << config.status().toString();
  return config.isOk() ? config.value() : ModelConfig();
}

/// The tensors the config expects, as BF16 fakes.
std::vector<FakeTensor> fakesFor(const ModelConfig &config) {
  std::vector<FakeTensor> fakes;
  for (const ExpectedTensor &tensor : expectedTensors(config))
    fakes.push_back({tensor.name, "BF16", tensor.shape});
  return fakes;
}

void removeTensor(std::vector<FakeTensor> &fakes, const std::string &name) {
  auto removed = std::remove_if(fakes.begin(), fakes.end(),
                                [&](const FakeTensor &tensor) { return tensor.name == name; });
  ASSERT_NE(removed, fakes.end()) << name;
  fakes.erase(removed, fakes.end());
}

std::vector<std::string> problemsWith(const ModelConfig &config,
                                      const std::vector<FakeTensor> &fakes) {
  ScratchDirectory scratch("check");
  txc::testing::writeSafetensors(scratch.file("model.safetensors"), fakes);
  auto checkpoint = Checkpoint::open(scratch.path());
  EXPECT_TRUE(checkpoint.isOk()) << checkpoint.status().toString();
  std::vector<std::string> messages;
  if (!checkpoint.isOk())
    return messages;
  for (const Status &problem : checkCheckpointAgainstConfig(config, checkpoint.value())) {
    EXPECT_EQ(problem.message().find('\n'), std::string::npos);
    messages.push_back(problem.message());
  }
  return messages;
}

TEST(CheckpointCheck, EveryFixtureFitsItsConfig) {
  for (const char *name : {"tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3"}) {
    auto checkpoint = Checkpoint::open(kFixtures + "/" + name);
    ASSERT_TRUE(checkpoint.isOk()) << checkpoint.status().toString();
    std::vector<Status> problems =
        checkCheckpointAgainstConfig(fixtureConfig(name), checkpoint.value());
    for (const Status &problem : problems)
      ADD_FAILURE() << name << ": " << problem.message();
  }
}

TEST(CheckpointCheck, Stories260KFitsItsConfig) {
  std::string directory = std::string(TXC_SOURCE_DIR) + "/../shared/models/stories260K";
  struct stat info;
  if (::stat(directory.c_str(), &info) != 0)
    GTEST_SKIP() << directory << " is not on this machine";
  auto config = loadModelConfig(directory + "/config.json");
  ASSERT_TRUE(config.isOk()) << config.status().toString();
  auto checkpoint = Checkpoint::open(directory);
  ASSERT_TRUE(checkpoint.isOk()) << checkpoint.status().toString();
  EXPECT_TRUE(checkCheckpointAgainstConfig(config.value(), checkpoint.value()).empty());
}

TEST(CheckpointCheck, ReportsAMissingTensorWithTheShapeItNeeds) {
  ModelConfig config = fixtureConfig("tiny-qwen3");
  std::vector<FakeTensor> fakes = fakesFor(config);
  removeTensor(fakes, "model.layers.1.self_attn.q_norm.weight");
  std::vector<std::string> problems = problemsWith(config, fakes);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("model.safetensors: tensor "
                             "'model.layers.1.self_attn.q_norm.weight' is "
                             "missing (Qwen3ForCausalLM with this config.json "
                             "needs [32])"),
            std::string::npos)
      << problems[0];
}

TEST(CheckpointCheck, ReportsShapesThatDisagreeWithTheConfig) {
  ModelConfig config = fixtureConfig("tiny-llama");
  std::vector<FakeTensor> fakes = fakesFor(config);
  config.numKvHeads = 4; // the checkpoint was made with 2
  std::vector<std::string> problems = problemsWith(config, fakes);
  ASSERT_EQ(problems.size(), 4u); // k_proj and v_proj of both layers
  EXPECT_NE(problems[0].find("tensor 'model.layers.0.self_attn.k_proj.weight': "
                             "shape [64, 64], but config.json implies "
                             "[128, 64]"),
            std::string::npos)
      << problems[0];
}

TEST(CheckpointCheck, ReportsTensorsTheArchitectureDoesNotKnow) {
  ModelConfig config = fixtureConfig("tiny-llama");
  std::vector<FakeTensor> fakes = fakesFor(config);
  // A bias the config does not ask for would be silently dropped otherwise.
  fakes.push_back({"model.layers.0.self_attn.q_proj.bias", "BF16", {128}});
  fakes.push_back({"model.layers.2.input_layernorm.weight", "BF16", {64}});
  fakes.push_back({"vision_tower.patch_embed", "F32", {4}});
  std::vector<std::string> problems = problemsWith(config, fakes);
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_NE(problems[0].find("tensor 'model.layers.0.self_attn.q_proj.bias' is "
                             "not part of a LlamaForCausalLM with this "
                             "config.json"),
            std::string::npos)
      << problems[0];
  EXPECT_NE(problems[1].find("'model.layers.2.input_layernorm.weight' is not "
                             "part of"),
            std::string::npos);
  EXPECT_NE(problems[2].find("'vision_tower.patch_embed'"), std::string::npos);
}

TEST(CheckpointCheck, ToleratesRotaryBuffersAndAHeadCopyOfTiedEmbeddings) {
  ModelConfig config = fixtureConfig("tiny-qwen2"); // tied
  std::vector<FakeTensor> fakes = fakesFor(config);
  fakes.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {8}});
  fakes.push_back({"lm_head.weight", "BF16", {256, 64}});
  EXPECT_TRUE(problemsWith(config, fakes).empty());
  // ... but a head copy must still have the head's shape.
  fakes.back().shape = {255, 64};
  std::vector<std::string> problems = problemsWith(config, fakes);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("'lm_head.weight': shape [255, 64], but "
                             "config.json implies [256, 64]"),
            std::string::npos);
}

TEST(CheckpointCheck, RequiresTheHeadOfAnUntiedModel) {
  ModelConfig config = fixtureConfig("tiny-mistral");
  std::vector<FakeTensor> fakes = fakesFor(config);
  removeTensor(fakes, "lm_head.weight");
  std::vector<std::string> problems = problemsWith(config, fakes);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("'lm_head.weight' is missing"), std::string::npos);
}

} // namespace
} // namespace txc::frontend
