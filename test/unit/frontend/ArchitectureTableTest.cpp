//===- ArchitectureTableTest.cpp - The rows and the tensors they imply ----===//

#include "lib/frontend/ArchitectureTable.h"
#include "lib/frontend/CheckpointCheck.h"
#include "lib/frontend/ConfigParser.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace txc::frontend {
namespace {

const std::string kFixtures = std::string(TXC_SOURCE_DIR) + "/test/fixtures";

ModelConfig fixtureConfig(const std::string &name) {
  auto config = loadModelConfig(kFixtures + "/" + name + "/config.json");
  EXPECT_TRUE(config.isOk()) << config.status().toString();
  return config.isOk() ? config.value() : ModelConfig();
}

std::set<std::string> namesOf(const std::vector<ExpectedTensor> &tensors) {
  std::set<std::string> names;
  for (const ExpectedTensor &tensor : tensors)
    names.insert(tensor.name);
  return names;
}

TEST(ArchitectureTable, ListsTheFourFamiliesAndFindsThemByEitherName) {
  EXPECT_EQ(supportedArchitectureList(), "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                                         "Qwen3ForCausalLM");
  EXPECT_EQ(findArchitecture("Qwen3ForCausalLM"), findArchitectureByModelType("qwen3"));
  EXPECT_EQ(findArchitecture("qwen3"), nullptr);
  EXPECT_EQ(findArchitectureByModelType("gemma"), nullptr);
}

TEST(ArchitectureTable, ImpliesLlamaTensorsWithGqaAndWideHeads) {
  std::vector<ExpectedTensor> expected = expectedTensors(fixtureConfig("tiny-llama"));
  ASSERT_EQ(expected.size(), 3u + 2 * 9); // embed, norm, lm_head; 9 per layer
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ExpectedTensor &tensor : expected)
    shapes[tensor.name] = tensor.shape;
  EXPECT_EQ(shapes["lm_head.weight"], (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(shapes["model.layers.1.self_attn.q_proj.weight"],
            (std::vector<int64_t>{128, 64})); // 4 heads x 32
  EXPECT_EQ(shapes["model.layers.1.self_attn.k_proj.weight"],
            (std::vector<int64_t>{64, 64})); // 2 kv heads x 32
  EXPECT_EQ(shapes["model.layers.0.self_attn.o_proj.weight"], (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(shapes["model.layers.0.mlp.down_proj.weight"], (std::vector<int64_t>{64, 128}));
}

TEST(ArchitectureTable, ImpliesQwen2BiasesAndTiedHead) {
  std::set<std::string> names = namesOf(expectedTensors(fixtureConfig("tiny-qwen2")));
  EXPECT_EQ(names.size(), 2u + 3 * 12);
  EXPECT_TRUE(names.count("model.layers.2.self_attn.v_proj.bias"));
  EXPECT_FALSE(names.count("model.layers.2.self_attn.o_proj.bias"));
  EXPECT_FALSE(names.count("lm_head.weight"));
}

TEST(ArchitectureTable, ImpliesQwen3QkNormsOverHeadDim) {
  ModelConfig config = fixtureConfig("tiny-qwen3");
  std::vector<ExpectedTensor> expected = expectedTensors(config);
  EXPECT_EQ(expected.size(), 2u + 2 * 11);
  bool sawNorm = false;
  for (const ExpectedTensor &tensor : expected)
    if (tensor.name == "model.layers.0.self_attn.k_norm.weight") {
      sawNorm = true;
      EXPECT_EQ(tensor.shape, std::vector<int64_t>{32});
    }
  EXPECT_TRUE(sawNorm);
}

TEST(ArchitectureTable, ImpliesLlamaBiasesOnlyWhenTheConfigAsks) {
  ModelConfig config = fixtureConfig("tiny-llama");
  config.qkvBias = config.outputProjBias = config.mlpBias = true;
  std::set<std::string> names = namesOf(expectedTensors(config));
  EXPECT_EQ(names.size(), 3u + 2 * 16);
  EXPECT_TRUE(names.count("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_TRUE(names.count("model.layers.1.mlp.down_proj.bias"));
}

} // namespace
} // namespace txc::frontend
