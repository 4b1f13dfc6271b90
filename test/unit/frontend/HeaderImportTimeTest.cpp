//===- HeaderImportTimeTest.cpp - A Llama-3-8B header import is fast ------===//
//
// Opening a checkpoint must map it, never read it. A Llama-3-8B-shaped
// checkpoint (the real tensor names and shapes, four shards and an index,
// 16 GB of BF16) is written as sparse files whose data sections are holes,
// so the test costs no disk; reading it would take seconds even from the
// page cache, mapping it takes milliseconds.
//
//===----------------------------------------------------------------------===//

#include "lib/frontend/CheckpointCheck.h"
#include "lib/frontend/ConfigParser.h"
#include "test/unit/safetensors/SafetensorsTestFiles.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

namespace txc::frontend {
namespace {

using txc::testing::FakeTensor;

/// meta-llama/Meta-Llama-3-8B's config.json, as transformers 4.40 wrote it.
constexpr const char *kLlama3_8BConfig = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "bos_token_id": 128000, "eos_token_id": 128001,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": null, "rope_theta": 500000.0, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0",
  "use_cache": true, "vocab_size": 128256})";

TEST(HeaderImportTime, Llama3_8BHeadersImportWellUnderASecond) {
  txc::testing::ScratchDirectory scratch("llama3-8b");
  auto config = parseModelConfig(kLlama3_8BConfig, "Meta-Llama-3-8B/config.json");
  ASSERT_TRUE(config.isOk()) << config.status().toString();

  // Eight layers per shard, the embedding in the first, head and norm in
  // the last, as the real checkpoint splits roughly.
  constexpr int kShards = 4;
  std::vector<std::vector<FakeTensor>> shards(kShards);
  nlohmann::json weightMap = nlohmann::json::object();
  uint64_t totalBytes = 0;
  for (const ExpectedTensor &tensor : expectedTensors(config.value())) {
    int shard = 0;
    if (tensor.name.rfind("model.layers.", 0) == 0)
      shard = std::stoi(tensor.name.substr(13)) / 8;
    else if (tensor.name != "model.embed_tokens.weight")
      shard = kShards - 1;
    shards[shard].push_back({tensor.name, "BF16", tensor.shape});
    char shardName[64];
    std::snprintf(shardName, sizeof(shardName), "model-%05d-of-%05d.safetensors", shard + 1,
                  kShards);
    weightMap[tensor.name] = shardName;
    totalBytes += txc::testing::fakeByteSize(shards[shard].back());
  }
  for (int shard = 0; shard < kShards; ++shard) {
    char shardName[64];
    std::snprintf(shardName, sizeof(shardName), "model-%05d-of-%05d.safetensors", shard + 1,
                  kShards);
    txc::testing::writeSafetensors(scratch.file(shardName), shards[shard],
                                   /*sparse=*/true);
  }
  txc::testing::writeBytes(
      scratch.file("model.safetensors.index.json"),
      nlohmann::json{{"metadata", {{"total_size", totalBytes}}}, {"weight_map", weightMap}}.dump());
  txc::testing::writeBytes(scratch.file("config.json"), kLlama3_8BConfig);
  EXPECT_EQ(totalBytes, 16060522496u); // Llama-3-8B's 8.03 B parameters

  auto start = std::chrono::steady_clock::now();
  auto loadedConfig = loadModelConfig(scratch.file("config.json"));
  auto checkpoint = Checkpoint::open(scratch.path());
  ASSERT_TRUE(loadedConfig.isOk()) << loadedConfig.status().toString();
  ASSERT_TRUE(checkpoint.isOk()) << checkpoint.status().toString();
  std::vector<Status> problems =
      checkCheckpointAgainstConfig(loadedConfig.value(), checkpoint.value());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  EXPECT_TRUE(problems.empty()) << problems.front().message();
  EXPECT_EQ(checkpoint->tensors().size(), 291u); // 32 x 9 + 3
  std::printf("header import of a Llama-3-8B-shaped checkpoint (4 shards, "
              "%.2f GB): %.2f ms\n",
              totalBytes / 1e9, seconds * 1e3);
  RecordProperty("header_import_ms", std::to_string(seconds * 1e3));
  EXPECT_LT(seconds, 0.25) << "the header import reads weights, or worse";
}

} // namespace
} // namespace txc::frontend
