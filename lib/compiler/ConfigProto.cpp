//===- ConfigProto.cpp - ModelConfig -> the artifact's config ----------------===//

#include "lib/compiler/ConfigProto.h"

#include "lib/frontend/ArchitectureTable.h"

namespace txc {

artifact::pb::ModelConfig toProto(const frontend::ModelConfig &config) {
  artifact::pb::ModelConfig out;
  out.set_architecture(std::string(config.architectureName()));
  if (config.architecture)
    out.set_model_type(std::string(config.architecture->modelType));
  out.set_hidden_size(config.hiddenSize);
  out.set_intermediate_size(config.intermediateSize);
  out.set_num_layers(config.numLayers);
  out.set_num_attention_heads(config.numHeads);
  out.set_num_key_value_heads(config.numKvHeads);
  out.set_head_dim(config.headDim);
  out.set_vocab_size(config.vocabSize);
  out.set_rms_norm_eps(config.rmsNormEps);
  out.set_hidden_act(std::string(frontend::activationName(config.hiddenAct)));
  out.set_rope_theta(config.rope.theta);
  if (config.rope.scaling != frontend::RopeScalingType::kDefault) {
    artifact::pb::RopeScaling *rope = out.mutable_rope_scaling();
    rope->set_type(std::string(frontend::ropeScalingTypeName(config.rope.scaling)));
    rope->set_factor(config.rope.factor);
    rope->set_low_freq_factor(config.rope.lowFreqFactor);
    rope->set_high_freq_factor(config.rope.highFreqFactor);
    rope->set_original_max_position_embeddings(config.rope.originalMaxPositionEmbeddings);
    rope->set_attention_factor(config.rope.attentionFactor);
    rope->set_beta_fast(config.rope.betaFast);
    rope->set_beta_slow(config.rope.betaSlow);
  }
  out.set_max_position_embeddings(config.maxPositionEmbeddings);
  for (int64_t window : config.slidingWindows)
    out.add_layer_sliding_windows(window);
  out.set_tie_word_embeddings(config.tieWordEmbeddings);
  out.set_attention_bias(config.qkvBias);
  out.set_attention_output_bias(config.outputProjBias);
  out.set_mlp_bias(config.mlpBias);
  out.set_qk_norm(config.qkNorm);
  if (config.bosTokenId)
    out.add_bos_token_ids(*config.bosTokenId);
  for (int64_t eos : config.eosTokenIds)
    out.add_eos_token_ids(eos);
  out.set_pad_token_id(-1);
  return out;
}

} // namespace txc
