//===- ConfigParserTest.cpp - config.json of every family and style ------===//

#include "lib/frontend/ConfigParser.h"
#include "lib/frontend/ArchitectureTable.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

namespace txc::frontend {
namespace {

using nlohmann::json;

const std::string kFixtures = std::string(TXC_SOURCE_DIR) + "/test/fixtures";

ModelConfig loadFixture(const std::string &name) {
  auto config = loadModelConfig(kFixtures + "/" + name + "/config.json");
  EXPECT_TRUE(config.isOk()) << config.status().toString();
  return config.isOk() ? config.value() : ModelConfig();
}

StatusOr<ModelConfig> parse(const json &config) {
  return parseModelConfig(config.dump(), "config.json");
}

/// The message of a parse that must fail, checked to be one line that
/// starts with the file name.
std::string errorOf(const json &config) {
  auto result = parse(config);
  EXPECT_FALSE(result.isOk()) << config.dump();
  if (result.isOk())
    return "";
  const std::string &message = result.status().message();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.rfind("config.json: ", 0), 0u) << message;
  return message;
}

#define EXPECT_ERROR(config, fragment)                                                             \
  do {                                                                                             \
    std::string message_ = errorOf(config);                                                        \
    EXPECT_NE(message_.find(fragment), std::string::npos) << message_;                             \
  } while (0)

/// A small valid Llama config in the transformers 4.x style.
json llama4x() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"vocab_size", 256},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"rope_scaling", nullptr},
          {"hidden_act", "silu"},
          {"tie_word_embeddings", false}};
}

json withArchitecture(json config, const std::string &name, const std::string &modelType) {
  config["architectures"] = {name};
  config["model_type"] = modelType;
  return config;
}

TEST(ConfigParser, ReadsTheTinyLlamaFixture) {
  ModelConfig config = loadFixture("tiny-llama");
  EXPECT_EQ(config.architectureName(), "LlamaForCausalLM");
  EXPECT_EQ(config.hiddenSize, 64);
  EXPECT_EQ(config.intermediateSize, 128);
  EXPECT_EQ(config.numLayers, 2);
  EXPECT_EQ(config.numHeads, 4);
  EXPECT_EQ(config.numKvHeads, 2);
  EXPECT_EQ(config.headDim, 32); // not 64 / 4
  EXPECT_EQ(config.vocabSize, 256);
  EXPECT_EQ(config.maxPositionEmbeddings, 128);
  EXPECT_DOUBLE_EQ(config.rmsNormEps, 1e-5);
  EXPECT_FALSE(config.tieWordEmbeddings);
  EXPECT_FALSE(config.qkvBias || config.outputProjBias || config.mlpBias);
  EXPECT_FALSE(config.qkNorm);
  EXPECT_EQ(config.rope.scaling, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(config.rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(config.rope.factor, 8.0);
  EXPECT_DOUBLE_EQ(config.rope.lowFreqFactor, 1.0);
  EXPECT_DOUBLE_EQ(config.rope.highFreqFactor, 4.0);
  EXPECT_EQ(config.rope.originalMaxPositionEmbeddings, 32);
  EXPECT_EQ(config.slidingWindows, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(config.bosTokenId, 1);
  EXPECT_EQ(config.eosTokenIds, std::vector<int64_t>{2});
}

TEST(ConfigParser, ReadsTheTinyMistralFixture) {
  ModelConfig config = loadFixture("tiny-mistral");
  EXPECT_EQ(config.architectureName(), "MistralForCausalLM");
  EXPECT_EQ(config.numKvHeads, 1);
  EXPECT_EQ(config.headDim, 16);
  EXPECT_EQ(config.slidingWindows, (std::vector<int64_t>{6, 6}));
  EXPECT_EQ(config.rope.scaling, RopeScalingType::kDefault);
  EXPECT_DOUBLE_EQ(config.rope.theta, 1e6);
  EXPECT_FALSE(config.qkvBias);
}

TEST(ConfigParser, ReadsTheTinyQwen2Fixture) {
  ModelConfig config = loadFixture("tiny-qwen2");
  EXPECT_EQ(config.architectureName(), "Qwen2ForCausalLM");
  EXPECT_EQ(config.numLayers, 3);
  EXPECT_TRUE(config.qkvBias);
  EXPECT_FALSE(config.outputProjBias);
  EXPECT_TRUE(config.tieWordEmbeddings);
  EXPECT_EQ(config.rope.scaling, RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(config.rope.factor, 2.0);
  // max_window_layers 2, layer_types [full, full, sliding].
  EXPECT_EQ(config.slidingWindows, (std::vector<int64_t>{0, 0, 5}));
  EXPECT_DOUBLE_EQ(config.rmsNormEps, 1e-6);
}

TEST(ConfigParser, ReadsTheTinyQwen3Fixture) {
  ModelConfig config = loadFixture("tiny-qwen3");
  EXPECT_EQ(config.architectureName(), "Qwen3ForCausalLM");
  EXPECT_TRUE(config.qkNorm);
  EXPECT_FALSE(config.qkvBias);
  EXPECT_EQ(config.headDim, 32);
  EXPECT_EQ(config.rope.scaling, RopeScalingType::kYarn);
  EXPECT_DOUBLE_EQ(config.rope.factor, 4.0);
  EXPECT_EQ(config.rope.originalMaxPositionEmbeddings, 32);
  EXPECT_DOUBLE_EQ(config.rope.betaFast, 32.0);
  EXPECT_DOUBLE_EQ(config.rope.betaSlow, 1.0);
  EXPECT_DOUBLE_EQ(config.rope.attentionFactor, 0.1 * std::log(4.0) + 1.0);
  // use_sliding_window is false: layer_types alone opens no window.
  EXPECT_EQ(config.slidingWindows, (std::vector<int64_t>{0, 0}));
}

TEST(ConfigParser, ReadsStories260K) {
  std::string path = std::string(TXC_SOURCE_DIR) + "/../shared/models/stories260K/config.json";
  struct stat info;
  if (::stat(path.c_str(), &info) != 0)
    GTEST_SKIP() << path << " is not on this machine";
  auto config = loadModelConfig(path);
  ASSERT_TRUE(config.isOk()) << config.status().toString();
  EXPECT_EQ(config->numHeads, 8);
  EXPECT_EQ(config->numKvHeads, 4);
  EXPECT_EQ(config->headDim, 8);
  EXPECT_TRUE(config->tieWordEmbeddings);
  EXPECT_EQ(config->rope.scaling, RopeScalingType::kDefault);
}

TEST(ConfigParser, ReadsLlama31InTheTransformers4Style) {
  json config = llama4x();
  config["rope_theta"] = 500000.0;
  config["rope_scaling"] = {{"factor", 8.0},
                            {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0},
                            {"original_max_position_embeddings", 8192},
                            {"rope_type", "llama3"}};
  config["max_position_embeddings"] = 131072;
  config["eos_token_id"] = {128001, 128008, 128009};
  config["bos_token_id"] = 128000;
  auto parsed = parse(config);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
  EXPECT_EQ(parsed->rope.scaling, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(parsed->rope.theta, 500000.0);
  EXPECT_EQ(parsed->rope.originalMaxPositionEmbeddings, 8192);
  EXPECT_EQ(parsed->eosTokenIds, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(parsed->bosTokenId, 128000);
  EXPECT_EQ(parsed->headDim, 16);
}

TEST(ConfigParser, ReadsTheOldTypeKeyForRopeScaling) {
  json config = llama4x();
  config["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  auto linear = parse(config);
  ASSERT_TRUE(linear.isOk()) << linear.status().toString();
  EXPECT_EQ(linear->rope.scaling, RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(linear->rope.factor, 4.0);
  config["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  auto dynamic = parse(config);
  ASSERT_TRUE(dynamic.isOk()) << dynamic.status().toString();
  EXPECT_EQ(dynamic->rope.scaling, RopeScalingType::kDynamic);
  EXPECT_EQ(dynamic->rope.originalMaxPositionEmbeddings, 2048); // Llama's default
}

TEST(ConfigParser, ReadsYarnInTheQwen25Style) {
  json config = withArchitecture(llama4x(), "Qwen2ForCausalLM", "qwen2");
  config["max_position_embeddings"] = 32768;
  config["rope_scaling"] = {{"factor", 4.0},
                            {"original_max_position_embeddings", 32768},
                            {"type", "yarn"},
                            {"mscale", 0.707},
                            {"mscale_all_dim", 0.707}};
  auto parsed = parse(config);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
  EXPECT_EQ(parsed->rope.scaling, RopeScalingType::kYarn);
  EXPECT_EQ(parsed->rope.originalMaxPositionEmbeddings, 32768);
  // Equal mscales cancel: transformers' ratio of two get_mscale values.
  EXPECT_DOUBLE_EQ(parsed->rope.attentionFactor, 1.0);
  config["rope_scaling"]["attention_factor"] = 1.25;
  config["rope_scaling"]["beta_fast"] = 16;
  auto explicitFactor = parse(config);
  ASSERT_TRUE(explicitFactor.isOk());
  EXPECT_DOUBLE_EQ(explicitFactor->rope.attentionFactor, 1.25);
  EXPECT_DOUBLE_EQ(explicitFactor->rope.betaFast, 16.0);
  // A null factor is transformers' cue to use the context ratio.
  config["rope_scaling"]["factor"] = nullptr;
  config["rope_scaling"]["original_max_position_embeddings"] = 8192;
  auto ratio = parse(config);
  ASSERT_TRUE(ratio.isOk()) << ratio.status().toString();
  EXPECT_DOUBLE_EQ(ratio->rope.factor, 4.0);
}

TEST(ConfigParser, ReadsRopeParametersInTheTransformers5Style) {
  json config = llama4x();
  config.erase("rope_theta");
  config.erase("rope_scaling");
  config["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 250000.0}, {"factor", 3.0}};
  auto parsed = parse(config);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
  EXPECT_DOUBLE_EQ(parsed->rope.theta, 250000.0);
  EXPECT_DOUBLE_EQ(parsed->rope.factor, 3.0);
  // rope_scaling, when set, wins, as in transformers.
  config["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 5.0}};
  auto overridden = parse(config);
  ASSERT_TRUE(overridden.isOk());
  EXPECT_EQ(overridden->rope.scaling, RopeScalingType::kDynamic);
  EXPECT_DOUBLE_EQ(overridden->rope.theta, 10000.0); // the family default
}

TEST(ConfigParser, AppliesFamilyDefaultsForMissingKeys) {
  json mistral = withArchitecture(llama4x(), "MistralForCausalLM", "mistral");
  mistral["num_attention_heads"] = 16;
  mistral.erase("num_key_value_heads");
  mistral.erase("rms_norm_eps");
  auto parsedMistral = parse(mistral);
  ASSERT_TRUE(parsedMistral.isOk()) << parsedMistral.status().toString();
  EXPECT_EQ(parsedMistral->numKvHeads, 8);
  EXPECT_EQ(parsedMistral->slidingWindows, (std::vector<int64_t>{4096, 4096}));
  EXPECT_DOUBLE_EQ(parsedMistral->rmsNormEps, 1e-6);
  EXPECT_EQ(parsedMistral->maxPositionEmbeddings, 131072);

  json qwen3 = withArchitecture(llama4x(), "Qwen3ForCausalLM", "qwen3");
  auto parsedQwen3 = parse(qwen3);
  ASSERT_TRUE(parsedQwen3.isOk());
  EXPECT_EQ(parsedQwen3->headDim, 128); // Qwen3Config's default
  EXPECT_FALSE(parsedQwen3->bosTokenId.has_value());
  EXPECT_TRUE(parsedQwen3->eosTokenIds.empty());

  json llama = llama4x();
  llama["num_key_value_heads"] = nullptr; // null means "as many as heads"
  auto parsedLlama = parse(llama);
  ASSERT_TRUE(parsedLlama.isOk());
  EXPECT_EQ(parsedLlama->numKvHeads, 4);
}

TEST(ConfigParser, ReadsAttentionAndMlpBiasKeys) {
  json llama = llama4x();
  llama["attention_bias"] = true;
  llama["mlp_bias"] = true;
  auto parsed = parse(llama);
  ASSERT_TRUE(parsed.isOk());
  EXPECT_TRUE(parsed->qkvBias && parsed->outputProjBias && parsed->mlpBias);
  // Mistral has neither key: transformers builds it without biases.
  auto mistral = parse(withArchitecture(llama, "MistralForCausalLM", "mistral"));
  ASSERT_TRUE(mistral.isOk());
  EXPECT_FALSE(mistral->qkvBias || mistral->outputProjBias || mistral->mlpBias);
}

TEST(ConfigParser, ResolvesQwenSlidingWindowLayers) {
  json qwen2 = withArchitecture(llama4x(), "Qwen2ForCausalLM", "qwen2");
  qwen2["num_hidden_layers"] = 4;
  qwen2["sliding_window"] = 131072;
  qwen2["max_window_layers"] = 21;
  qwen2["use_sliding_window"] = false;
  auto off = parse(qwen2);
  ASSERT_TRUE(off.isOk());
  EXPECT_EQ(off->slidingWindows, (std::vector<int64_t>(4, 0)));

  qwen2["use_sliding_window"] = true;
  qwen2["sliding_window"] = 64;
  qwen2["max_window_layers"] = 1;
  auto byIndex = parse(qwen2);
  ASSERT_TRUE(byIndex.isOk());
  EXPECT_EQ(byIndex->slidingWindows, (std::vector<int64_t>{0, 64, 64, 64}));

  qwen2["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention",
                          "full_attention"};
  auto byType = parse(qwen2);
  ASSERT_TRUE(byType.isOk());
  EXPECT_EQ(byType->slidingWindows, (std::vector<int64_t>{64, 0, 64, 0}));

  json mistral = withArchitecture(llama4x(), "MistralForCausalLM", "mistral");
  mistral["sliding_window"] = nullptr;
  auto none = parse(mistral);
  ASSERT_TRUE(none.isOk());
  EXPECT_EQ(none->slidingWindows, (std::vector<int64_t>{0, 0}));
}

TEST(ConfigParser, FallsBackToModelTypeWithoutArchitectures) {
  json config = llama4x();
  config.erase("architectures");
  config["model_type"] = "qwen2";
  auto parsed = parse(config);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
  EXPECT_EQ(parsed->architectureName(), "Qwen2ForCausalLM");
}

TEST(ConfigParser, RejectsUnsupportedArchitecturesListingTheSupportedOnes) {
  json config = llama4x();
  config["architectures"] = {"GPT2LMHeadModel"};
  EXPECT_ERROR(config, "architecture 'GPT2LMHeadModel' is not supported; "
                       "supported: LlamaForCausalLM, MistralForCausalLM, "
                       "Qwen2ForCausalLM, Qwen3ForCausalLM");
  EXPECT_EQ(parse(config).status().code(), StatusCode::kUnimplemented);
  config.erase("architectures");
  config["model_type"] = "gpt2";
  EXPECT_ERROR(config, "model_type 'gpt2' is not supported; supported: Llama");
  config.erase("model_type");
  EXPECT_ERROR(config, "neither \"architectures\" nor \"model_type\" names the "
                       "model; supported: Llama");
  config["architectures"] = json::array();
  EXPECT_ERROR(config, "\"architectures\" must be a non-empty list of names");
}

TEST(ConfigParser, RejectsTextThatIsNotAJsonObject) {
  for (const char *text : {"{\"hidden_size\": ", "[1, 2]", "", "nul"}) {
    auto result = parseModelConfig(text, "config.json");
    ASSERT_FALSE(result.isOk()) << text;
    EXPECT_EQ(result.status().message().rfind("config.json: ", 0), 0u);
  }
  EXPECT_NE(parseModelConfig("[1]", "config.json")
                .status()
                .message()
                .find("config is JSON but not an object"),
            std::string::npos);
}

TEST(ConfigParser, RejectsMissingOrMalformedSizes) {
  json config = llama4x();
  config.erase("hidden_size");
  EXPECT_ERROR(config, "\"hidden_size\" is missing");
  config = llama4x();
  config["num_hidden_layers"] = -2;
  EXPECT_ERROR(config, "\"num_hidden_layers\" must be an integer in [1, 1024], "
                       "got '-2'");
  config["num_hidden_layers"] = 2.5;
  EXPECT_ERROR(config, "got '2.5'");
  config["num_hidden_layers"] = 100000;
  EXPECT_ERROR(config, "\"num_hidden_layers\" must be an integer in [1, 1024]");
  config = llama4x();
  config["vocab_size"] = "256";
  EXPECT_ERROR(config, "\"vocab_size\" must be an integer");
  config["vocab_size"] = 18446744073709551615ull;
  EXPECT_ERROR(config, "\"vocab_size\" must be an integer");
}

TEST(ConfigParser, RejectsHeadCountsThatDoNotDivide) {
  json config = llama4x();
  config["num_key_value_heads"] = 3;
  EXPECT_ERROR(config, "\"num_attention_heads\" (4) must be a multiple of "
                       "num_key_value_heads (3)");
  config = llama4x();
  config["hidden_size"] = 66;
  EXPECT_ERROR(config, "\"hidden_size\" (66) is not a multiple of "
                       "num_attention_heads (4) and no head_dim is given");
  config["head_dim"] = 15;
  EXPECT_ERROR(config, "\"head_dim\" (15) must be even");
  config["head_dim"] = 16;
  EXPECT_TRUE(parse(config).isOk());
}

TEST(ConfigParser, RejectsBadNormEpsilonAndActivation) {
  json config = llama4x();
  config["rms_norm_eps"] = 0;
  EXPECT_ERROR(config, "\"rms_norm_eps\" must lie in (0, 1)");
  config["rms_norm_eps"] = "1e-5";
  EXPECT_ERROR(config, "\"rms_norm_eps\" must be a finite number");
  config = llama4x();
  config["hidden_act"] = "gelu_pytorch_tanh";
  EXPECT_ERROR(config, "hidden_act 'gelu_pytorch_tanh' is not supported "
                       "(supported: silu)");
  config = llama4x();
  config["tie_word_embeddings"] = "yes";
  EXPECT_ERROR(config, "\"tie_word_embeddings\" must be true or false");
}

TEST(ConfigParser, RejectsUnsupportedOrIncompleteRope) {
  json config = llama4x();
  config["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 2.0}};
  EXPECT_ERROR(config, "rope type 'longrope' is not supported (supported: "
                       "default, linear, dynamic, llama3, yarn)");
  config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"high_freq_factor", 4.0}};
  EXPECT_ERROR(config, "\"rope_scaling.low_freq_factor\" is missing (rope "
                       "type llama3 needs it)");
  config["rope_scaling"]["low_freq_factor"] = 4.0;
  EXPECT_ERROR(config, "\"rope_scaling.high_freq_factor\" must exceed "
                       "low_freq_factor");
  config["rope_scaling"] = {{"type", "linear"}};
  EXPECT_ERROR(config, "\"rope_scaling.factor\" is missing");
  config["rope_scaling"] = {{"type", "linear"}, {"factor", -1}};
  EXPECT_ERROR(config, "\"rope_scaling.factor\" must be positive");
  config["rope_scaling"] = {{"type", "yarn"}};
  EXPECT_ERROR(config, "\"rope_scaling.factor\" is missing (rope type yarn");
  config["rope_scaling"] = "linear";
  EXPECT_ERROR(config, "\"rope_scaling\" must be an object");
  config["rope_scaling"] = {{"full_attention", {{"rope_type", "default"}}}};
  EXPECT_ERROR(config, "holds per-layer-type parameters ('full_attention')");
  config = llama4x();
  config["partial_rotary_factor"] = 0.5;
  EXPECT_ERROR(config, "\"partial_rotary_factor\" is 0.500000; txc rotates "
                       "whole heads only");
  config = llama4x();
  config["rope_theta"] = -5;
  EXPECT_ERROR(config, "\"rope_theta\" must be positive");
}

TEST(ConfigParser, RejectsMalformedSlidingWindows) {
  json config = withArchitecture(llama4x(), "Qwen2ForCausalLM", "qwen2");
  config["use_sliding_window"] = true;
  config["sliding_window"] = 0;
  EXPECT_ERROR(config, "\"sliding_window\" must be an integer in [1, ");
  config["sliding_window"] = 8;
  config["layer_types"] = {"full_attention"};
  EXPECT_ERROR(config, "\"layer_types\" must list one type per layer (2)");
  config["layer_types"] = {"full_attention", "chunked_attention"};
  EXPECT_ERROR(config, "\"layer_types\" holds '\"chunked_attention\"'");
}

TEST(ConfigParser, RejectsMalformedTokenIds) {
  json config = llama4x();
  config["eos_token_id"] = {2, "3"};
  EXPECT_ERROR(config, "\"eos_token_id\" must hold token ids");
  config["eos_token_id"] = -1;
  EXPECT_ERROR(config, "\"eos_token_id\" must be an integer");
  config = llama4x();
  config["bos_token_id"] = {1};
  EXPECT_ERROR(config, "\"bos_token_id\" must be an integer");
}

TEST(ConfigParser, ReportsAMissingFileByPath) {
  auto result = loadModelConfig("/nonexistent/config.json");
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_NE(result.status().message().find("/nonexistent/config.json"), std::string::npos);
}

} // namespace
} // namespace txc::frontend
