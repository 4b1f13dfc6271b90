//===- ArchitectureTable.h - One row per supported model family -*- C++ -*-===//
//
// Everything that differs between the families txc imports lives in a row of
// this table: which config keys matter, what transformers assumes when a key
// is missing, and which tensors a checkpoint holds with which shapes.
// Adding a family that reuses these building blocks (say Gemma's norms or
// Phi's fused QKV aside) is one more row; only a truly new mechanism needs
// new code.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_LIB_FRONTEND_ARCHITECTURETABLE_H
#define TXC_LIB_FRONTEND_ARCHITECTURETABLE_H

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace txc::frontend {

struct ModelConfig;

/// Which attention projections have a bias.
enum class AttentionBiasRule {
  kNone,             // Mistral
  kQkvAlways,        // Qwen2: q/k/v always, o never
  kAttentionBiasKey, // Llama, Qwen3: `attention_bias` adds it to q/k/v/o
};

/// Which layers attend through a sliding window.
enum class SlidingWindowRule {
  kNone,        // Llama: full attention everywhere
  kEveryLayer,  // Mistral: `sliding_window` (null: none) on all layers
  kWindowLayers // Qwen2/3: only if `use_sliding_window`; then the layers
                // `layer_types` marks "sliding_attention", or else those at
                // index >= `max_window_layers`
};

/// The sizes a tensor shape is made of, resolved against a ModelConfig.
enum class Dim {
  kHidden,
  kIntermediate,
  kQueryWidth, // num_attention_heads x head_dim
  kKvWidth,    // num_key_value_heads x head_dim
  kHeadDim,
  kVocab,
};
int64_t resolveDim(Dim dim, const ModelConfig &config);

/// When a tensor is part of the checkpoint.
enum class Presence {
  kAlways,
  kQkvBias,
  kOutputProjBias,
  kMlpBias,
  kQkNorm,
  kUntiedLmHead, // required unless tie_word_embeddings; tolerated when tied
};

struct TensorTemplate {
  /// Per-layer names are relative to "model.layers.<i>.".
  std::string_view name;
  std::vector<Dim> shape;
  Presence presence = Presence::kAlways;
};

/// transformers' values for keys a config.json leaves out.
struct ArchitectureDefaults {
  double ropeTheta = 10000.0;
  double rmsNormEps = 1e-6;
  int64_t maxPositionEmbeddings = 0;
  bool tieWordEmbeddings = false;
  /// nullopt: num_attention_heads (also when the key is null).
  std::optional<int64_t> numKvHeads;
  /// nullopt: hidden_size / num_attention_heads.
  std::optional<int64_t> headDim;
  std::optional<int64_t> slidingWindow;
  int64_t maxWindowLayers = 0;
  std::optional<int64_t> bosTokenId;
  std::optional<int64_t> eosTokenId;
};

struct ArchitectureSpec {
  /// config.json's `architectures[0]`, e.g. "Qwen2ForCausalLM".
  std::string_view name;
  /// config.json's `model_type`, used when `architectures` is absent.
  std::string_view modelType;
  AttentionBiasRule attentionBias = AttentionBiasRule::kNone;
  /// Llama's `mlp_bias` key puts a bias on gate/up/down.
  bool readsMlpBias = false;
  bool qkNorm = false;
  SlidingWindowRule slidingWindow = SlidingWindowRule::kNone;
  ArchitectureDefaults defaults;
  const std::vector<TensorTemplate> *globalTensors = nullptr;
  const std::vector<TensorTemplate> *layerTensors = nullptr;
  /// Per-layer names a checkpoint may carry that txc does not need (old
  /// Llama exports saved the rotary inverse frequencies).
  const std::vector<std::string_view> *ignoredLayerTensors = nullptr;
};

/// Every supported architecture, in a fixed order.
const std::vector<ArchitectureSpec> &architectureTable();
/// nullptr when unsupported.
const ArchitectureSpec *findArchitecture(std::string_view name);
const ArchitectureSpec *findArchitectureByModelType(std::string_view modelType);
/// "LlamaForCausalLM, MistralForCausalLM, ..." for error messages.
std::string supportedArchitectureList();

} // namespace txc::frontend

#endif // TXC_LIB_FRONTEND_ARCHITECTURETABLE_H
