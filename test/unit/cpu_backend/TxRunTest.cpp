//===- TxRunTest.cpp - tx-run end to end, and its tokenizer ----------------===//
#include "TestTensors.h"
#include "TinyModel.h"

#include "tools/tx-run/Tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <sstream>
#include <sys/wait.h>

namespace txc::cpu::testing {
namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
};

CliRun runTxRun(const std::string &args) {
  std::string command = std::string(TX_RUN_PATH) + " " + args + " 2>&1";
  CliRun run;
  FILE *pipe = popen(command.c_str(), "r");
  if (!pipe)
    return run;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    run.out.append(buffer.data(), n);
  int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(TxRun, HelpListsTheFlags) {
  CliRun run = runTxRun("--help");
  EXPECT_EQ(run.exit_code, 0);
  for (const char *flag : {"--prompt-ids", "--prompt", "--max-new-tokens", "--temperature",
                           "--top-k", "--top-p", "--seed", "--weights", "--random-weights",
                           "--json", "--return-logits", "--device"})
    EXPECT_NE(run.out.find(flag), std::string::npos) << flag;
}

TEST(TxRun, GreedyJsonMatchesTheReturnedLogits) {
  std::string path = tempPath("tiny.txm");
  ASSERT_TRUE(writeTinyModel(path, {}).isOk());
  CliRun run = runTxRun(path + " --device cpu --prompt-ids 1,5,9 --prompt-ids 7,3,3,8,2,60 "
                            "--max-new-tokens 4 --json --return-logits");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  std::stringstream lines(run.out);
  std::string line;
  int requests = 0;
  while (std::getline(lines, line)) {
    nlohmann::json object = nlohmann::json::parse(line);
    EXPECT_EQ(object["request"].get<int>(), requests);
    std::vector<int32_t> ids = object["output_ids"];
    std::vector<std::vector<float>> logits = object["logits"];
    ASSERT_EQ(ids.size(), 4u);
    ASSERT_EQ(logits.size(), 4u);
    for (size_t step = 0; step < 4; ++step) {
      ASSERT_EQ(logits[step].size(), static_cast<size_t>(kTinyVocab));
      auto best = std::max_element(logits[step].begin(), logits[step].end());
      EXPECT_EQ(ids[step], best - logits[step].begin()) << "request " << requests << " step " << step;
    }
    ++requests;
  }
  EXPECT_EQ(requests, 2);
}

TEST(TxRun, BadInputIsOneLineAndNonZero) {
  for (const std::string &args :
       {std::string("missing.txm --prompt-ids 1"), std::string("m.txm --prompt-ids 1,x"),
        std::string("m.txm --prompt-ids 1 --device tpu"), std::string("m.txm"),
        std::string("m.txm --prompt-ids 1 --device cuda"), std::string("m.txm --bogus")}) {
    CliRun run = runTxRun(args);
    EXPECT_NE(run.exit_code, 0) << args;
    EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 1) << args << ": " << run.out;
    EXPECT_EQ(run.out.rfind("tx-run: ", 0), 0u) << run.out;
  }
  CliRun missing = runTxRun("missing.txm --prompt-ids 1");
  EXPECT_NE(missing.out.find("missing.txm"), std::string::npos);
}

TEST(Tokenizer, ByteLevelBpeRoundTripAndMerges) {
  // GPT-2 alphabet: space is "Ġ" (U+0120). Merges build "Ġhi" and "hi".
  std::string json = R"({"model": {"type": "BPE", "vocab": {"h": 0, "i": 1, "Ġ": 2,
      "hi": 3, "Ġh": 4, "Ġhi": 5, "!": 6}, "merges": ["Ġ h", "Ġh i", "h i"]},
      "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
      "added_tokens": [{"id": 7, "content": "<|endoftext|>", "special": true}]})";
  auto tokenizer = tools::Tokenizer::fromJson(json, "test.json");
  ASSERT_TRUE(tokenizer.isOk()) << tokenizer.status().toString();
  EXPECT_TRUE(tokenizer->byteLevel());
  artifact::pb::ModelConfig config;
  auto ids = tokenizer->encode("hi hi!", config);
  ASSERT_TRUE(ids.isOk());
  EXPECT_EQ(*ids, (std::vector<int32_t>{3, 5, 6}));
  EXPECT_EQ(tokenizer->decode({3, 5, 6, 7}), "hi hi!");
}

TEST(Tokenizer, SentencepieceVocabularyListDecodesBytesAndDropsBos) {
  std::string json = R"(["<unk>", "\n<s>\n", "\n</s>\n", "<0x0A>", " Once", " upon", "a", " a", " time", ","])";
  auto tokenizer = tools::Tokenizer::fromJson(json, "vocab.json");
  ASSERT_TRUE(tokenizer.isOk());
  EXPECT_EQ(tokenizer->decode({1, 4, 5, 7, 8, 9, 3, 2}), "Once upon a time,\n");
  artifact::pb::ModelConfig config;
  config.add_bos_token_ids(1);
  auto ids = tokenizer->encode("Once upon a time", config);
  ASSERT_TRUE(ids.isOk());
  EXPECT_EQ(*ids, (std::vector<int32_t>{1, 4, 5, 7, 8}));
}

} // namespace
} // namespace txc::cpu::testing
