//===- ConfigParser.cpp - config.json to ModelConfig ----------------------===//
//
// Follows transformers 5.17: where a key is absent the family's default
// applies (ArchitectureTable.cpp); where it is null, what the config class's
// __post_init__ does with None.
//
//===----------------------------------------------------------------------===//

#include "lib/frontend/ConfigParser.h"

#include "lib/frontend/ArchitectureTable.h"
#include "runtime/safetensors/MappedFile.h"
#include "runtime/safetensors/StrictJson.h"

#include <cmath>
#include <limits>

namespace txc::frontend {

namespace {

using nlohmann::json;

constexpr int64_t kMaxPositions = int64_t(1) << 32;
constexpr int64_t kMaxTokenId = std::numeric_limits<int32_t>::max();
constexpr uint64_t kMaxConfigBytes = 16 << 20;

/// Typed access to the keys of one JSON object, with errors that name the
/// key as the user wrote it ("rope_parameters.factor").
class Fields {
public:
  Fields(const json &object, const std::string &source, std::string prefix = "")
      : object_(object), source_(source), prefix_(std::move(prefix)) {}

  bool present(const char *key) const { return object_.contains(key); }
  /// Present with a non-null value.
  bool has(const char *key) const {
    auto it = object_.find(key);
    return it != object_.end() && !it->is_null();
  }

  Status error(const char *key, const std::string &problem) const {
    return invalidArgument(source_ + ": \"" + prefix_ + key + "\" " + problem);
  }

  /// Absent or null: nullopt.
  StatusOr<std::optional<int64_t>> integer(const char *key, int64_t min, int64_t max) const {
    if (!has(key))
      return std::optional<int64_t>();
    const json &value = object_.at(key);
    int64_t result = 0;
    bool isInteger = false;
    if (value.is_number_unsigned()) {
      uint64_t unsignedValue = value.get<uint64_t>();
      isInteger = unsignedValue <= uint64_t(max);
      result = static_cast<int64_t>(unsignedValue);
    } else if (value.is_number_integer()) {
      result = value.get<int64_t>();
      isInteger = true;
    }
    if (!isInteger || result < min || result > max)
      return error(key, "must be an integer in [" + std::to_string(min) + ", " +
                            std::to_string(max) + "], got " + shown(value));
    return std::optional<int64_t>(result);
  }

  StatusOr<int64_t> requiredInteger(const char *key, int64_t min, int64_t max) const {
    TXC_ASSIGN_OR_RETURN(std::optional<int64_t> value, integer(key, min, max));
    if (!value)
      return error(key, "is missing");
    return *value;
  }

  /// A finite number; absent or null: nullopt.
  StatusOr<std::optional<double>> number(const char *key) const {
    if (!has(key))
      return std::optional<double>();
    const json &value = object_.at(key);
    if (!value.is_number() || !std::isfinite(value.get<double>()))
      return error(key, "must be a finite number, got " + shown(value));
    return std::optional<double>(value.get<double>());
  }

  StatusOr<std::optional<bool>> boolean(const char *key) const {
    if (!has(key))
      return std::optional<bool>();
    const json &value = object_.at(key);
    if (!value.is_boolean())
      return error(key, "must be true or false, got " + shown(value));
    return std::optional<bool>(value.get<bool>());
  }

  StatusOr<std::optional<std::string>> string(const char *key) const {
    if (!has(key))
      return std::optional<std::string>();
    const json &value = object_.at(key);
    if (!value.is_string())
      return error(key, "must be a string, got " + shown(value));
    return std::optional<std::string>(value.get<std::string>());
  }

  const json &at(const char *key) const { return object_.at(key); }

private:
  static std::string shown(const json &value) { return quoteForMessage(value.dump()); }

  const json &object_;
  const std::string &source_;
  std::string prefix_;
};

StatusOr<const ArchitectureSpec *> resolveArchitecture(const Fields &fields,
                                                       const std::string &source) {
  std::string supported = "; supported: " + supportedArchitectureList();
  if (fields.has("architectures")) {
    const json &architectures = fields.at("architectures");
    if (!architectures.is_array() || architectures.empty() || !architectures[0].is_string())
      return fields.error("architectures", "must be a non-empty list of names");
    // transformers builds architectures[0]; so does txc.
    const std::string &name = architectures[0].get_ref<const std::string &>();
    if (const ArchitectureSpec *spec = findArchitecture(name))
      return spec;
    return unimplemented(source + ": architecture " + quoteForMessage(name) + " is not supported" +
                         supported);
  }
  TXC_ASSIGN_OR_RETURN(std::optional<std::string> modelType, fields.string("model_type"));
  if (!modelType)
    return invalidArgument(source +
                           ": neither \"architectures\" nor "
                           "\"model_type\" names the model" +
                           supported);
  if (const ArchitectureSpec *spec = findArchitectureByModelType(*modelType))
    return spec;
  return unimplemented(source + ": model_type " + quoteForMessage(*modelType) +
                       " is not supported" + supported);
}

/// transformers' yarn get_mscale.
double yarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

StatusOr<double> requiredPositive(const Fields &fields, const char *key,
                                  const std::string &ropeType) {
  TXC_ASSIGN_OR_RETURN(std::optional<double> value, fields.number(key));
  if (!value)
    return fields.error(key, "is missing (rope type " + ropeType + " needs it)");
  if (*value <= 0)
    return fields.error(key, "must be positive, got " + std::to_string(*value));
  return *value;
}

Status parseRope(const Fields &root, const ArchitectureSpec &spec, int64_t maxPositionEmbeddings,
                 const std::string &source, RopeConfig &rope) {
  // transformers: `rope_parameters = rope_scaling or rope_parameters`.
  const char *paramsKey = nullptr;
  for (const char *key : {"rope_scaling", "rope_parameters"}) {
    if (root.has(key)) {
      paramsKey = key;
      break;
    }
  }
  static const json kEmpty = json::object();
  const json &params = paramsKey ? root.at(paramsKey) : kEmpty;
  if (paramsKey && !params.is_object())
    return root.error(paramsKey, "must be an object");
  for (const auto &[key, value] : params.items())
    if (value.is_object())
      return root.error(paramsKey, "holds per-layer-type parameters (" + quoteForMessage(key) +
                                       "), which txc does not support");
  Fields fields(params, source, std::string(paramsKey ? paramsKey : "rope_parameters") + ".");

  TXC_ASSIGN_OR_RETURN(std::optional<std::string> ropeType, fields.string("rope_type"));
  if (!ropeType) {
    TXC_ASSIGN_OR_RETURN(ropeType, fields.string("type"));
  }
  std::string type = ropeType.value_or("default");

  TXC_ASSIGN_OR_RETURN(std::optional<double> theta, fields.number("rope_theta"));
  if (!theta) {
    TXC_ASSIGN_OR_RETURN(theta, root.number("rope_theta"));
  }
  rope.theta = theta.value_or(spec.defaults.ropeTheta);
  if (rope.theta <= 0)
    return root.error("rope_theta", "must be positive, got " + std::to_string(rope.theta));

  for (const Fields *where : std::initializer_list<const Fields *>{&fields, &root}) {
    TXC_ASSIGN_OR_RETURN(std::optional<double> partial, where->number("partial_rotary_factor"));
    if (partial && *partial != 1.0)
      return where->error("partial_rotary_factor",
                          "is " + std::to_string(*partial) + "; txc rotates whole heads only");
  }

  auto originalMax = [&]() -> StatusOr<int64_t> {
    TXC_ASSIGN_OR_RETURN(std::optional<int64_t> value,
                         fields.integer("original_max_position_embeddings", 1, kMaxPositions));
    return value.value_or(maxPositionEmbeddings);
  };

  if (type == "default") {
    rope.scaling = RopeScalingType::kDefault;
  } else if (type == "linear" || type == "dynamic") {
    rope.scaling = type == "linear" ? RopeScalingType::kLinear : RopeScalingType::kDynamic;
    TXC_ASSIGN_OR_RETURN(rope.factor, requiredPositive(fields, "factor", type));
    // transformers' dynamic NTK stretches relative to max_position_embeddings
    // and ignores any original_max_position_embeddings.
    if (rope.scaling == RopeScalingType::kDynamic)
      rope.originalMaxPositionEmbeddings = maxPositionEmbeddings;
  } else if (type == "llama3") {
    rope.scaling = RopeScalingType::kLlama3;
    TXC_ASSIGN_OR_RETURN(rope.factor, requiredPositive(fields, "factor", type));
    TXC_ASSIGN_OR_RETURN(rope.lowFreqFactor, requiredPositive(fields, "low_freq_factor", type));
    TXC_ASSIGN_OR_RETURN(rope.highFreqFactor, requiredPositive(fields, "high_freq_factor", type));
    // The blend divides by their difference.
    if (rope.highFreqFactor <= rope.lowFreqFactor)
      return fields.error("high_freq_factor", "must exceed low_freq_factor (" +
                                                  std::to_string(rope.lowFreqFactor) + ")");
    TXC_ASSIGN_OR_RETURN(rope.originalMaxPositionEmbeddings, originalMax());
  } else if (type == "yarn") {
    rope.scaling = RopeScalingType::kYarn;
    TXC_ASSIGN_OR_RETURN(rope.originalMaxPositionEmbeddings, originalMax());
    if (!fields.present("factor"))
      return fields.error("factor", "is missing (rope type yarn needs it)");
    if (fields.has("factor")) {
      TXC_ASSIGN_OR_RETURN(rope.factor, requiredPositive(fields, "factor", type));
    } else { // null: transformers takes the context ratio
      rope.factor = double(maxPositionEmbeddings) / double(rope.originalMaxPositionEmbeddings);
    }
    // transformers reads these with `or`, so 0 and null mean the default.
    TXC_ASSIGN_OR_RETURN(std::optional<double> betaFast, fields.number("beta_fast"));
    TXC_ASSIGN_OR_RETURN(std::optional<double> betaSlow, fields.number("beta_slow"));
    rope.betaFast = betaFast && *betaFast != 0 ? *betaFast : 32.0;
    rope.betaSlow = betaSlow && *betaSlow != 0 ? *betaSlow : 1.0;
    TXC_ASSIGN_OR_RETURN(std::optional<bool> truncate, fields.boolean("truncate"));
    rope.truncate = truncate.value_or(true);
    TXC_ASSIGN_OR_RETURN(std::optional<double> attentionFactor, fields.number("attention_factor"));
    TXC_ASSIGN_OR_RETURN(std::optional<double> mscale, fields.number("mscale"));
    TXC_ASSIGN_OR_RETURN(std::optional<double> mscaleAllDim, fields.number("mscale_all_dim"));
    if (attentionFactor)
      rope.attentionFactor = *attentionFactor;
    else if (mscale && *mscale != 0 && mscaleAllDim && *mscaleAllDim != 0)
      rope.attentionFactor =
          yarnMscale(rope.factor, *mscale) / yarnMscale(rope.factor, *mscaleAllDim);
    else
      rope.attentionFactor = yarnMscale(rope.factor, 1.0);
  } else {
    return unimplemented(source + ": rope type " + quoteForMessage(type) +
                         " is not supported (supported: default, linear, "
                         "dynamic, llama3, yarn)");
  }
  return Status::ok();
}

/// Absent: the family default; null: no window.
StatusOr<std::optional<int64_t>> slidingWindowSize(const Fields &root,
                                                   const ArchitectureSpec &spec) {
  if (!root.present("sliding_window"))
    return spec.defaults.slidingWindow;
  return root.integer("sliding_window", 1, kMaxPositions);
}

Status parseSlidingWindows(const Fields &root, const ArchitectureSpec &spec, ModelConfig &config) {
  config.slidingWindows.assign(config.numLayers, 0);
  switch (spec.slidingWindow) {
  case SlidingWindowRule::kNone:
    return Status::ok();
  case SlidingWindowRule::kEveryLayer: {
    TXC_ASSIGN_OR_RETURN(std::optional<int64_t> window, slidingWindowSize(root, spec));
    if (window)
      config.slidingWindows.assign(config.numLayers, *window);
    return Status::ok();
  }
  case SlidingWindowRule::kWindowLayers: {
    std::vector<bool> slidingLayers;
    if (root.has("layer_types")) {
      const json &layerTypes = root.at("layer_types");
      if (!layerTypes.is_array() || layerTypes.size() != size_t(config.numLayers))
        return root.error("layer_types", "must list one type per layer (" +
                                             std::to_string(config.numLayers) + ")");
      for (const json &type : layerTypes) {
        if (type == "sliding_attention")
          slidingLayers.push_back(true);
        else if (type == "full_attention")
          slidingLayers.push_back(false);
        else
          return root.error("layer_types", "holds " + quoteForMessage(type.dump()) +
                                               "; txc knows \"full_attention\" and "
                                               "\"sliding_attention\"");
      }
    }
    TXC_ASSIGN_OR_RETURN(std::optional<bool> useSlidingWindow, root.boolean("use_sliding_window"));
    TXC_ASSIGN_OR_RETURN(std::optional<int64_t> window, slidingWindowSize(root, spec));
    // transformers drops the window unless use_sliding_window is set.
    if (!useSlidingWindow.value_or(false) || !window)
      return Status::ok();
    TXC_ASSIGN_OR_RETURN(std::optional<int64_t> maxWindowLayers,
                         root.integer("max_window_layers", 0, std::numeric_limits<int32_t>::max()));
    for (int64_t layer = 0; layer < config.numLayers; ++layer) {
      bool sliding = slidingLayers.empty()
                         ? layer >= maxWindowLayers.value_or(spec.defaults.maxWindowLayers)
                         : bool(slidingLayers[layer]);
      if (sliding)
        config.slidingWindows[layer] = *window;
    }
    return Status::ok();
  }
  }
  return Status::ok();
}

Status parseSpecialTokens(const Fields &root, const ArchitectureSpec &spec, ModelConfig &config) {
  if (!root.present("bos_token_id")) {
    config.bosTokenId = spec.defaults.bosTokenId;
  } else {
    TXC_ASSIGN_OR_RETURN(config.bosTokenId, root.integer("bos_token_id", 0, kMaxTokenId));
  }
  config.eosTokenIds.clear();
  if (!root.present("eos_token_id")) {
    if (spec.defaults.eosTokenId)
      config.eosTokenIds.push_back(*spec.defaults.eosTokenId);
    return Status::ok();
  }
  if (!root.has("eos_token_id"))
    return Status::ok();
  const json &eos = root.at("eos_token_id");
  if (!eos.is_array()) {
    TXC_ASSIGN_OR_RETURN(std::optional<int64_t> id, root.integer("eos_token_id", 0, kMaxTokenId));
    config.eosTokenIds.push_back(*id);
    return Status::ok();
  }
  for (size_t i = 0; i < eos.size(); ++i) {
    if (!eos[i].is_number_integer() || eos[i].get<int64_t>() < 0 ||
        eos[i].get<int64_t>() > kMaxTokenId)
      return root.error("eos_token_id", "must hold token ids in [0, " +
                                            std::to_string(kMaxTokenId) + "], got " +
                                            quoteForMessage(eos[i].dump()));
    config.eosTokenIds.push_back(eos[i].get<int64_t>());
  }
  return Status::ok();
}

} // namespace

std::string_view ropeScalingTypeName(RopeScalingType type) {
  switch (type) {
  case RopeScalingType::kDefault:
    return "default";
  case RopeScalingType::kLinear:
    return "linear";
  case RopeScalingType::kDynamic:
    return "dynamic";
  case RopeScalingType::kLlama3:
    return "llama3";
  case RopeScalingType::kYarn:
    return "yarn";
  }
  return "unknown";
}

std::string_view activationName(Activation activation) {
  switch (activation) {
  case Activation::kSilu:
    return "silu";
  }
  return "unknown";
}

std::string_view ModelConfig::architectureName() const {
  return architecture ? architecture->name : std::string_view();
}

StatusOr<ModelConfig> parseModelConfig(std::string_view jsonText, const std::string &sourceName) {
  TXC_ASSIGN_OR_RETURN(json root, parseStrictJson(jsonText, sourceName));
  if (!root.is_object())
    return invalidArgument(sourceName + ": config is JSON but not an object");
  Fields fields(root, sourceName);
  TXC_ASSIGN_OR_RETURN(const ArchitectureSpec *spec, resolveArchitecture(fields, sourceName));
  const ArchitectureDefaults &defaults = spec->defaults;

  ModelConfig config;
  config.architecture = spec;
  TXC_ASSIGN_OR_RETURN(config.hiddenSize, fields.requiredInteger("hidden_size", 1, kMaxDimension));
  TXC_ASSIGN_OR_RETURN(config.intermediateSize,
                       fields.requiredInteger("intermediate_size", 1, kMaxDimension));
  TXC_ASSIGN_OR_RETURN(config.numLayers,
                       fields.requiredInteger("num_hidden_layers", 1, kMaxLayers));
  TXC_ASSIGN_OR_RETURN(config.numHeads,
                       fields.requiredInteger("num_attention_heads", 1, kMaxHeads));
  TXC_ASSIGN_OR_RETURN(config.vocabSize, fields.requiredInteger("vocab_size", 1, kMaxDimension));

  TXC_ASSIGN_OR_RETURN(std::optional<int64_t> kvHeads,
                       fields.integer("num_key_value_heads", 1, kMaxHeads));
  if (kvHeads)
    config.numKvHeads = *kvHeads;
  else if (fields.present("num_key_value_heads")) // null
    config.numKvHeads = config.numHeads;
  else
    config.numKvHeads = defaults.numKvHeads.value_or(config.numHeads);
  if (config.numHeads % config.numKvHeads != 0)
    return fields.error("num_attention_heads", "(" + std::to_string(config.numHeads) +
                                                   ") must be a multiple of num_key_value_heads (" +
                                                   std::to_string(config.numKvHeads) + ")");

  TXC_ASSIGN_OR_RETURN(std::optional<int64_t> headDim,
                       fields.integer("head_dim", 1, kMaxDimension));
  if (!headDim)
    headDim = defaults.headDim;
  if (!headDim) {
    if (config.hiddenSize % config.numHeads != 0)
      return fields.error("hidden_size", "(" + std::to_string(config.hiddenSize) +
                                             ") is not a multiple of num_attention_heads (" +
                                             std::to_string(config.numHeads) +
                                             ") and no head_dim is given");
    headDim = config.hiddenSize / config.numHeads;
  }
  config.headDim = *headDim;
  if (config.headDim % 2 != 0)
    return fields.error("head_dim", "(" + std::to_string(config.headDim) +
                                        ") must be even: rotary embeddings "
                                        "rotate pairs");

  TXC_ASSIGN_OR_RETURN(std::optional<int64_t> maxPositions,
                       fields.integer("max_position_embeddings", 1, kMaxPositions));
  config.maxPositionEmbeddings = maxPositions.value_or(defaults.maxPositionEmbeddings);

  TXC_ASSIGN_OR_RETURN(std::optional<double> eps, fields.number("rms_norm_eps"));
  config.rmsNormEps = eps.value_or(defaults.rmsNormEps);
  if (!(config.rmsNormEps > 0 && config.rmsNormEps < 1))
    return fields.error("rms_norm_eps",
                        "must lie in (0, 1), got " + std::to_string(config.rmsNormEps));

  TXC_ASSIGN_OR_RETURN(std::optional<std::string> act, fields.string("hidden_act"));
  std::string activation = act.value_or("silu");
  if (activation == "silu" || activation == "swish")
    config.hiddenAct = Activation::kSilu;
  else
    return unimplemented(sourceName + ": hidden_act " + quoteForMessage(activation) +
                         " is not supported (supported: silu)");

  TXC_ASSIGN_OR_RETURN(std::optional<bool> tie, fields.boolean("tie_word_embeddings"));
  config.tieWordEmbeddings = tie.value_or(defaults.tieWordEmbeddings);

  switch (spec->attentionBias) {
  case AttentionBiasRule::kNone:
    break;
  case AttentionBiasRule::kQkvAlways:
    config.qkvBias = true;
    break;
  case AttentionBiasRule::kAttentionBiasKey: {
    TXC_ASSIGN_OR_RETURN(std::optional<bool> bias, fields.boolean("attention_bias"));
    config.qkvBias = config.outputProjBias = bias.value_or(false);
    break;
  }
  }
  if (spec->readsMlpBias) {
    TXC_ASSIGN_OR_RETURN(std::optional<bool> mlpBias, fields.boolean("mlp_bias"));
    config.mlpBias = mlpBias.value_or(false);
  }
  config.qkNorm = spec->qkNorm;

  TXC_RETURN_IF_ERROR(
      parseRope(fields, *spec, config.maxPositionEmbeddings, sourceName, config.rope));
  TXC_RETURN_IF_ERROR(parseSlidingWindows(fields, *spec, config));
  TXC_RETURN_IF_ERROR(parseSpecialTokens(fields, *spec, config));
  return config;
}

StatusOr<ModelConfig> loadModelConfig(const std::string &path) {
  TXC_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::open(path));
  if (file->size() > kMaxConfigBytes)
    return invalidArgument(path + ": " + std::to_string(file->size()) +
                           " bytes, more than any config.json needs");
  std::string_view text(reinterpret_cast<const char *>(file->data()), file->size());
  return parseModelConfig(text, path);
}

} // namespace txc::frontend
