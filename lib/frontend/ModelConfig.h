//===- ModelConfig.h - What config.json says about a model -----*- C++ -*-===//
//
// A plain description of a decoder-only transformer, filled from a Hugging
// Face config.json by parseModelConfig (ConfigParser.h) with every default
// resolved the way transformers resolves it, so nothing downstream reads JSON
// or needs to know which transformers version wrote the file.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_LIB_FRONTEND_MODELCONFIG_H
#define TXC_LIB_FRONTEND_MODELCONFIG_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace txc::frontend {

struct ArchitectureSpec;

/// transformers' rope_type values that txc implements.
enum class RopeScalingType { kDefault, kLinear, kDynamic, kLlama3, kYarn };
std::string_view ropeScalingTypeName(RopeScalingType type);

struct RopeConfig {
  double theta = 10000.0;
  RopeScalingType scaling = RopeScalingType::kDefault;
  /// linear, dynamic, llama3, yarn: how much the context was stretched.
  double factor = 1.0;
  /// llama3, yarn: the context length of pretraining; dynamic:
  /// max_position_embeddings, the length past which it stretches.
  int64_t originalMaxPositionEmbeddings = 0;
  /// llama3: wavelengths between original/low and original/high are blended.
  double lowFreqFactor = 0.0;
  double highFreqFactor = 0.0;
  /// yarn: the correction range (transformers' defaults) ...
  double betaFast = 32.0;
  double betaSlow = 1.0;
  bool truncate = true;
  /// ... and the cos/sin scale: taken as given, or derived from factor,
  /// mscale and mscale_all_dim (resolved by the parser, never absent for yarn).
  double attentionFactor = 1.0;
};

enum class Activation { kSilu };
std::string_view activationName(Activation activation);

struct ModelConfig {
  /// The table row of the architecture; never null once parsed.
  const ArchitectureSpec *architecture = nullptr;

  int64_t hiddenSize = 0;
  int64_t intermediateSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;
  /// May differ from hiddenSize / numHeads (Qwen3, Gemma).
  int64_t headDim = 0;
  int64_t vocabSize = 0;
  int64_t maxPositionEmbeddings = 0;
  double rmsNormEps = 1e-6;
  Activation hiddenAct = Activation::kSilu;
  bool tieWordEmbeddings = false;

  /// Which projections carry a bias.
  bool qkvBias = false;
  bool outputProjBias = false;
  bool mlpBias = false;
  /// RMSNorm over head_dim on q and k before rotary (Qwen3).
  bool qkNorm = false;

  RopeConfig rope;
  /// One entry per layer: the sliding window in tokens (a query at position
  /// p sees keys in (p - window, p]), or 0 for full causal attention.
  std::vector<int64_t> slidingWindows;

  std::optional<int64_t> bosTokenId;
  std::vector<int64_t> eosTokenIds;

  int64_t queryWidth() const { return numHeads * headDim; }
  int64_t kvWidth() const { return numKvHeads * headDim; }
  /// "LlamaForCausalLM".
  std::string_view architectureName() const;
};

} // namespace txc::frontend

#endif // TXC_LIB_FRONTEND_MODELCONFIG_H
