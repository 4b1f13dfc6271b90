//===- ArtifactTestUtil.cpp - Small artifacts for the artifact tests ------===//
#include "ArtifactTestUtil.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <unistd.h>

namespace txc::artifact::testing {

std::string tempPath(const std::string &stem) {
  static std::atomic<int> counter{0};
  return ::testing::TempDir() + "txc_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter++) + "_" + stem;
}

pb::Artifact makeMessage() {
  pb::Artifact message;
  pb::ModelConfig *config = message.mutable_config();
  config->set_architecture("Qwen3ForCausalLM");
  config->set_model_type("qwen3");
  config->set_hidden_size(8);
  config->set_intermediate_size(16);
  config->set_num_layers(1);
  config->set_num_attention_heads(2);
  config->set_num_key_value_heads(1);
  config->set_head_dim(4);
  config->set_vocab_size(16);
  config->set_rms_norm_eps(1e-6);
  config->set_rope_theta(1e6);
  config->mutable_rope_scaling()->set_type("yarn");
  config->mutable_rope_scaling()->set_factor(4.0);
  config->add_layer_sliding_windows(0);
  config->set_qk_norm(true);
  config->set_tie_word_embeddings(true);
  config->add_eos_token_ids(2);
  config->add_eos_token_ids(3);

  pb::CompileOptions *options = message.mutable_options();
  options->set_target("sm_90a");
  options->set_tensor_parallel(1);
  options->set_max_batch_tokens(256);
  options->set_max_seq_len(1024);
  options->set_kv_page_size(16);

  pb::Plan *plan = message.add_plans();
  plan->set_arena_bytes(4096);
  pb::Launch *embed = plan->add_launches();
  embed->set_op("txk.embedding");
  embed->add_operands()->mutable_step_input()->set_kind(pb::STEP_INPUT_TOKEN_IDS);
  embed->add_operands()->set_weight_index(0);
  pb::ArenaSlot *hidden = embed->add_results()->mutable_arena();
  hidden->set_offset(0);
  hidden->set_bytes(2048);
  hidden->add_shape(-1);
  hidden->add_shape(8);
  hidden->set_dtype(pb::DTYPE_BF16);
  pb::Launch *norm = plan->add_launches();
  norm->set_op("txk.rms_norm");
  (*norm->mutable_attributes())["eps"].set_float_value(1e-6);
  (*norm->mutable_attributes())["layer"].set_int_value(0);
  (*norm->mutable_attributes())["family"].set_string_value("warp_per_row");
  for (int64_t tile : {128, 64})
    (*norm->mutable_attributes())["tile"].mutable_int_list()->add_values(tile);
  *norm->add_operands() = embed->results(0);
  norm->add_operands()->set_weight_index(1);
  *norm->add_results()->mutable_arena() = *hidden;
  norm->mutable_results(0)->mutable_arena()->set_offset(2048);
  norm->set_kernel("rms_norm_8");

  pb::TargetKernels *kernels = message.add_kernels();
  kernels->set_target("sm_90a");
  pb::KernelImage *image = kernels->add_kernels();
  image->set_name("norm_module");
  image->set_cubin(std::string("\x7f" "ELF\0\1\2", 7));
  image->add_entry_points("rms_norm_8");

  message.set_tokenizer_json(R"({"version":"1.0","model":{"type":"BPE"}})");
  return message;
}

std::vector<unsigned char> patternBytes(size_t size, unsigned salt) {
  std::vector<unsigned char> bytes(size);
  for (size_t i = 0; i < size; ++i)
    bytes[i] = static_cast<unsigned char>((i * 131 + salt * 17 + 7) & 0xFF);
  return bytes;
}

std::vector<TestWeight> makeWeights() {
  return {
      {"model.embed_tokens.weight", DType::kBF16, {16, 8}, patternBytes(256, 1)},
      {"model.norm.weight", DType::kF32, {8}, patternBytes(32, 2)},
      {"model.layers.0.self_attn.q_proj.weight", DType::kF16, {8, 3},
       patternBytes(48, 3)},
  };
}

Status writeEmbeddedArtifact(const std::string &path) {
  ArtifactWriter writer(makeMessage());
  for (TestWeight &weight : makeWeights()) {
    StatusOr<uint32_t> index = writer.addWeightCopy(
        weight.name, weight.dtype, weight.shape, std::move(weight.bytes));
    if (!index.isOk())
      return index.status();
  }
  return writer.write(path);
}

std::vector<unsigned char> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeFile(const std::string &path, const std::vector<unsigned char> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

} // namespace txc::artifact::testing
