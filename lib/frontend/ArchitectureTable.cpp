//===- ArchitectureTable.cpp - One row per supported model family ---------===//
//
// Defaults are transformers 5.17's configuration_<family>.py values: a
// config.json written by save_pretrained omits keys equal to them.
//
//===----------------------------------------------------------------------===//

#include "lib/frontend/ArchitectureTable.h"

#include "lib/frontend/ModelConfig.h"

namespace txc::frontend {

namespace {

/// The Llama naming, shared by every family here.
const std::vector<TensorTemplate> kLlamaGlobalTensors = {
    {"model.embed_tokens.weight", {Dim::kVocab, Dim::kHidden}},
    {"model.norm.weight", {Dim::kHidden}},
    {"lm_head.weight", {Dim::kVocab, Dim::kHidden}, Presence::kUntiedLmHead},
};

const std::vector<TensorTemplate> kLlamaLayerTensors = {
    {"input_layernorm.weight", {Dim::kHidden}},
    {"self_attn.q_proj.weight", {Dim::kQueryWidth, Dim::kHidden}},
    {"self_attn.k_proj.weight", {Dim::kKvWidth, Dim::kHidden}},
    {"self_attn.v_proj.weight", {Dim::kKvWidth, Dim::kHidden}},
    {"self_attn.o_proj.weight", {Dim::kHidden, Dim::kQueryWidth}},
    {"self_attn.q_proj.bias", {Dim::kQueryWidth}, Presence::kQkvBias},
    {"self_attn.k_proj.bias", {Dim::kKvWidth}, Presence::kQkvBias},
    {"self_attn.v_proj.bias", {Dim::kKvWidth}, Presence::kQkvBias},
    {"self_attn.o_proj.bias", {Dim::kHidden}, Presence::kOutputProjBias},
    {"self_attn.q_norm.weight", {Dim::kHeadDim}, Presence::kQkNorm},
    {"self_attn.k_norm.weight", {Dim::kHeadDim}, Presence::kQkNorm},
    {"post_attention_layernorm.weight", {Dim::kHidden}},
    {"mlp.gate_proj.weight", {Dim::kIntermediate, Dim::kHidden}},
    {"mlp.up_proj.weight", {Dim::kIntermediate, Dim::kHidden}},
    {"mlp.down_proj.weight", {Dim::kHidden, Dim::kIntermediate}},
    {"mlp.gate_proj.bias", {Dim::kIntermediate}, Presence::kMlpBias},
    {"mlp.up_proj.bias", {Dim::kIntermediate}, Presence::kMlpBias},
    {"mlp.down_proj.bias", {Dim::kHidden}, Presence::kMlpBias},
};

const std::vector<std::string_view> kLlamaIgnoredLayerTensors = {
    "self_attn.rotary_emb.inv_freq",
};

ArchitectureSpec llamaLike(std::string_view name, std::string_view modelType) {
  ArchitectureSpec spec;
  spec.name = name;
  spec.modelType = modelType;
  spec.globalTensors = &kLlamaGlobalTensors;
  spec.layerTensors = &kLlamaLayerTensors;
  spec.ignoredLayerTensors = &kLlamaIgnoredLayerTensors;
  return spec;
}

std::vector<ArchitectureSpec> buildTable() {
  std::vector<ArchitectureSpec> table;

  ArchitectureSpec llama = llamaLike("LlamaForCausalLM", "llama");
  llama.attentionBias = AttentionBiasRule::kAttentionBiasKey;
  llama.readsMlpBias = true;
  llama.defaults.maxPositionEmbeddings = 2048;
  llama.defaults.bosTokenId = 1;
  llama.defaults.eosTokenId = 2;
  table.push_back(llama);

  ArchitectureSpec mistral = llamaLike("MistralForCausalLM", "mistral");
  mistral.slidingWindow = SlidingWindowRule::kEveryLayer;
  mistral.defaults.maxPositionEmbeddings = 4096 * 32;
  mistral.defaults.numKvHeads = 8;
  mistral.defaults.slidingWindow = 4096;
  mistral.defaults.bosTokenId = 1;
  mistral.defaults.eosTokenId = 2;
  table.push_back(mistral);

  ArchitectureSpec qwen2 = llamaLike("Qwen2ForCausalLM", "qwen2");
  qwen2.attentionBias = AttentionBiasRule::kQkvAlways;
  qwen2.slidingWindow = SlidingWindowRule::kWindowLayers;
  qwen2.defaults.maxPositionEmbeddings = 32768;
  qwen2.defaults.numKvHeads = 32;
  qwen2.defaults.slidingWindow = 4096;
  qwen2.defaults.maxWindowLayers = 28;
  table.push_back(qwen2);

  ArchitectureSpec qwen3 = llamaLike("Qwen3ForCausalLM", "qwen3");
  qwen3.attentionBias = AttentionBiasRule::kAttentionBiasKey;
  qwen3.qkNorm = true;
  qwen3.slidingWindow = SlidingWindowRule::kWindowLayers;
  qwen3.defaults.maxPositionEmbeddings = 32768;
  qwen3.defaults.numKvHeads = 32;
  qwen3.defaults.headDim = 128;
  qwen3.defaults.slidingWindow = 4096;
  qwen3.defaults.maxWindowLayers = 28;
  table.push_back(qwen3);

  return table;
}

} // namespace

const std::vector<ArchitectureSpec> &architectureTable() {
  static const std::vector<ArchitectureSpec> table = buildTable();
  return table;
}

const ArchitectureSpec *findArchitecture(std::string_view name) {
  for (const ArchitectureSpec &spec : architectureTable())
    if (spec.name == name)
      return &spec;
  return nullptr;
}

const ArchitectureSpec *findArchitectureByModelType(std::string_view modelType) {
  for (const ArchitectureSpec &spec : architectureTable())
    if (spec.modelType == modelType)
      return &spec;
  return nullptr;
}

std::string supportedArchitectureList() {
  std::string list;
  for (const ArchitectureSpec &spec : architectureTable())
    list += (list.empty() ? "" : ", ") + std::string(spec.name);
  return list;
}

int64_t resolveDim(Dim dim, const ModelConfig &config) {
  switch (dim) {
  case Dim::kHidden:
    return config.hiddenSize;
  case Dim::kIntermediate:
    return config.intermediateSize;
  case Dim::kQueryWidth:
    return config.queryWidth();
  case Dim::kKvWidth:
    return config.kvWidth();
  case Dim::kHeadDim:
    return config.headDim;
  case Dim::kVocab:
    return config.vocabSize;
  }
  return 0;
}

} // namespace txc::frontend
