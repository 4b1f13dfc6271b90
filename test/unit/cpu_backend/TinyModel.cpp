//===- TinyModel.cpp - A hand-built plan of a two-layer Llama-like model ---===//
#include "TinyModel.h"

#include "runtime/backends/cpu/Tensor.h"
#include "txc/artifact/ArtifactWriter.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace txc::cpu::testing {

namespace pb = artifact::pb;

namespace {

struct FullMatrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> values;
  float at(int64_t r, int64_t c) const { return values[r * cols + c]; }
};

FullMatrix randomMatrix(std::mt19937 &rng, int64_t rows, int64_t cols,
                        double center, double spread) {
  std::uniform_real_distribution<double> uniform(-spread, spread);
  FullMatrix m{rows, cols, std::vector<float>(static_cast<size_t>(rows * cols))};
  for (float &v : m.values)
    v = static_cast<float>(center + uniform(rng));
  return m;
}

FullMatrix rowSlice(const FullMatrix &m, int64_t begin, int64_t count) {
  FullMatrix out{count, m.cols, {}};
  out.values.assign(m.values.begin() + begin * m.cols,
                    m.values.begin() + (begin + count) * m.cols);
  return out;
}

FullMatrix colSlice(const FullMatrix &m, int64_t begin, int64_t count) {
  FullMatrix out{m.rows, count, {}};
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < count; ++c)
      out.values.push_back(m.at(r, begin + c));
  return out;
}

FullMatrix concatRows(std::initializer_list<FullMatrix> parts) {
  FullMatrix out{0, parts.begin()->cols, {}};
  for (const FullMatrix &p : parts) {
    out.rows += p.rows;
    out.values.insert(out.values.end(), p.values.begin(), p.values.end());
  }
  return out;
}

class PlanBuilder {
public:
  PlanBuilder(artifact::ArtifactWriter &writer, DType dtype, int64_t max_tokens)
      : writer_(writer), dtype_(dtype), max_tokens_(max_tokens) {}

  StatusOr<uint32_t> weight(const std::string &name, const FullMatrix &m,
                            bool vector) {
    std::vector<unsigned char> bytes(static_cast<size_t>(m.rows * m.cols) *
                                     dtypeSize(dtype_));
    storeRow(bytes.data(), dtype_, 0, m.values.size(), m.values.data());
    std::vector<int64_t> shape = vector ? std::vector<int64_t>{m.rows * m.cols}
                                        : std::vector<int64_t>{m.rows, m.cols};
    return writer_.addWeightCopy(name, dtype_, shape, std::move(bytes));
  }

  pb::ValueRef slot(int64_t cols) {
    pb::ValueRef ref;
    pb::ArenaSlot *arena = ref.mutable_arena();
    uint64_t bytes = static_cast<uint64_t>(max_tokens_ * cols) * dtypeSize(dtype_);
    arena->set_offset(arena_bytes_);
    arena->set_bytes(bytes);
    arena->add_shape(-1);
    arena->add_shape(cols);
    arena->set_dtype(artifact::toProtoDType(dtype_));
    arena_bytes_ += (bytes + 63) / 64 * 64;
    return ref;
  }

  static pb::ValueRef weightRef(uint32_t index) {
    pb::ValueRef ref;
    ref.set_weight_index(index);
    return ref;
  }
  static pb::ValueRef stepInput(pb::StepInputKind kind, int layer = 0) {
    pb::ValueRef ref;
    ref.mutable_step_input()->set_kind(kind);
    ref.mutable_step_input()->set_layer(layer);
    return ref;
  }

  uint64_t arenaBytes() const { return arena_bytes_; }

private:
  artifact::ArtifactWriter &writer_;
  DType dtype_;
  int64_t max_tokens_;
  uint64_t arena_bytes_ = 0;
};

pb::Launch &addLaunch(pb::Plan &plan, const std::string &op,
                      std::vector<pb::ValueRef> operands,
                      std::vector<pb::ValueRef> results) {
  pb::Launch &launch = *plan.add_launches();
  launch.set_op(op);
  launch.set_location("tiny_model.mlir:" + std::to_string(plan.launches_size()));
  for (pb::ValueRef &ref : operands)
    *launch.add_operands() = ref;
  for (pb::ValueRef &ref : results)
    *launch.add_results() = ref;
  return launch;
}

void setInt(pb::Launch &l, const std::string &k, int64_t v) {
  (*l.mutable_attributes())[k].set_int_value(v);
}
void setFloat(pb::Launch &l, const std::string &k, double v) {
  (*l.mutable_attributes())[k].set_float_value(v);
}
void setString(pb::Launch &l, const std::string &k, const std::string &v) {
  (*l.mutable_attributes())[k].set_string_value(v);
}
void setFlag(pb::Launch &l, const std::string &k) {
  (*l.mutable_attributes())[k].set_bool_value(true);
}

struct LayerWeights {
  FullMatrix ln1, wq, wk, wv, q_norm, k_norm, wo, ln2, wg, wu, wd;
  FullMatrix q_bias, k_bias, v_bias, o_bias, down_bias;
};

// A row-parallel GEMM's bias must enter the all_reduce once: rank 0 holds
// it, the other ranks an all-zero shard (their partial sums add nothing).
FullMatrix rowParallelBias(const FullMatrix &bias, int rank) {
  FullMatrix shard = bias;
  if (rank > 0)
    std::fill(shard.values.begin(), shard.values.end(), 0.0f);
  return shard;
}

FullMatrix concatVectors(std::initializer_list<FullMatrix> parts) {
  FullMatrix out{1, 0, {}};
  for (const FullMatrix &p : parts) {
    out.cols += p.cols;
    out.values.insert(out.values.end(), p.values.begin(), p.values.end());
  }
  return out;
}

FullMatrix vectorSlice(const FullMatrix &m, int64_t begin, int64_t count) {
  FullMatrix out{1, count, {}};
  out.values.assign(m.values.begin() + begin, m.values.begin() + begin + count);
  return out;
}

} // namespace

Status writeTinyModel(const std::string &path, const TinyModelOptions &options) {
  const int tp = options.tp;
  const int64_t H = options.hidden, D = options.head_dim;
  if (options.heads % tp || options.kv_heads % tp || options.intermediate % tp)
    return invalidArgument("tiny model: tp must divide heads and intermediate");
  const int64_t heads = options.heads / tp, kv_heads = options.kv_heads / tp,
                inter = options.intermediate / tp;

  std::mt19937 rng(static_cast<uint32_t>(options.seed));
  double w_scale = 1.0 / std::sqrt(static_cast<double>(H));
  FullMatrix embed = randomMatrix(rng, options.vocab, H, 0.0, 1.0);
  std::vector<LayerWeights> layers;
  for (int l = 0; l < options.num_layers; ++l) {
    LayerWeights w;
    w.ln1 = randomMatrix(rng, 1, H, 1.0, 0.1);
    w.wq = randomMatrix(rng, options.heads * D, H, 0.0, 2 * w_scale);
    w.wk = randomMatrix(rng, options.kv_heads * D, H, 0.0, 2 * w_scale);
    w.wv = randomMatrix(rng, options.kv_heads * D, H, 0.0, 2 * w_scale);
    w.q_norm = randomMatrix(rng, 1, D, 1.0, 0.2);
    w.k_norm = randomMatrix(rng, 1, D, 1.0, 0.2);
    w.wo = randomMatrix(rng, H, options.heads * D, 0.0, w_scale);
    w.ln2 = randomMatrix(rng, 1, H, 1.0, 0.1);
    w.wg = randomMatrix(rng, options.intermediate, H, 0.0, 2 * w_scale);
    w.wu = randomMatrix(rng, options.intermediate, H, 0.0, 2 * w_scale);
    w.wd = randomMatrix(rng, H, options.intermediate, 0.0, w_scale);
    w.q_bias = randomMatrix(rng, 1, options.heads * D, 0.0, 0.2);
    w.k_bias = randomMatrix(rng, 1, options.kv_heads * D, 0.0, 0.2);
    w.v_bias = randomMatrix(rng, 1, options.kv_heads * D, 0.0, 0.2);
    w.o_bias = randomMatrix(rng, 1, H, 0.0, 0.1);
    w.down_bias = randomMatrix(rng, 1, H, 0.0, 0.1);
    layers.push_back(std::move(w));
  }
  FullMatrix final_norm = randomMatrix(rng, 1, H, 1.0, 0.1);
  FullMatrix lm_head = randomMatrix(rng, options.vocab, H, 0.0, 2 * w_scale);

  pb::Artifact message;
  pb::ModelConfig *config = message.mutable_config();
  config->set_architecture("LlamaForCausalLM");
  config->set_model_type("llama");
  config->set_hidden_size(H);
  config->set_intermediate_size(options.intermediate);
  config->set_num_layers(options.num_layers);
  config->set_num_attention_heads(options.heads);
  config->set_num_key_value_heads(options.kv_heads);
  config->set_head_dim(D);
  config->set_vocab_size(options.vocab);
  config->set_rms_norm_eps(1e-5);
  config->set_rope_theta(10000.0);
  config->set_pad_token_id(-1);
  pb::CompileOptions *compile = message.mutable_options();
  compile->set_target("cpu");
  compile->set_tensor_parallel(tp);
  compile->set_max_batch_tokens(options.max_batch_tokens);
  compile->set_max_seq_len(options.max_seq_len);
  compile->set_kv_page_size(4);
  compile->set_max_num_seqs(8);
  compile->set_activation_dtype(artifact::toProtoDType(options.dtype));
  compile->set_kv_cache_dtype(artifact::toProtoDType(options.dtype));

  artifact::ArtifactWriter writer(std::move(message));
  PlanBuilder weights(writer, options.dtype, options.max_batch_tokens);
  TXC_ASSIGN_OR_RETURN(uint32_t embed_index, weights.weight("embed", embed, false));
  TXC_ASSIGN_OR_RETURN(uint32_t norm_index, weights.weight("norm", final_norm, true));
  TXC_ASSIGN_OR_RETURN(uint32_t head_index, weights.weight("lm_head", lm_head, false));
  std::vector<std::vector<uint32_t>> shared(options.num_layers);
  for (int l = 0; l < options.num_layers; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    for (auto [name, m] : {std::pair{"ln1", &layers[l].ln1},
                           std::pair{"ln2", &layers[l].ln2},
                           std::pair{"q_norm", &layers[l].q_norm},
                           std::pair{"k_norm", &layers[l].k_norm}}) {
      TXC_ASSIGN_OR_RETURN(uint32_t index, weights.weight(p + name, *m, true));
      shared[l].push_back(index);
    }
  }

  for (int r = 0; r < tp; ++r) {
    pb::Plan plan;
    PlanBuilder arena(writer, options.dtype, options.max_batch_tokens);
    using PB = PlanBuilder;
    pb::ValueRef hidden = arena.slot(H);
    addLaunch(plan, "txk.embedding",
              {PB::stepInput(pb::STEP_INPUT_TOKEN_IDS), PB::weightRef(embed_index)},
              {hidden});
    setInt(*plan.mutable_launches(0), "vocab_start", 0);
    for (int l = 0; l < options.num_layers; ++l) {
      const LayerWeights &w = layers[l];
      std::string p = "layers." + std::to_string(l) + ".rank" + std::to_string(r) + ".";
      FullMatrix wqkv = concatRows({rowSlice(w.wq, r * heads * D, heads * D),
                                    rowSlice(w.wk, r * kv_heads * D, kv_heads * D),
                                    rowSlice(w.wv, r * kv_heads * D, kv_heads * D)});
      TXC_ASSIGN_OR_RETURN(uint32_t qkv_index, weights.weight(p + "wqkv", wqkv, false));
      TXC_ASSIGN_OR_RETURN(uint32_t o_index,
                           weights.weight(p + "wo", colSlice(w.wo, r * heads * D, heads * D), false));
      FullMatrix wgu = concatRows({rowSlice(w.wg, r * inter, inter),
                                   rowSlice(w.wu, r * inter, inter)});
      TXC_ASSIGN_OR_RETURN(uint32_t gu_index, weights.weight(p + "wgu", wgu, false));
      TXC_ASSIGN_OR_RETURN(uint32_t d_index,
                           weights.weight(p + "wd", colSlice(w.wd, r * inter, inter), false));
      FullMatrix qkv_bias = concatVectors({vectorSlice(w.q_bias, r * heads * D, heads * D),
                                           vectorSlice(w.k_bias, r * kv_heads * D, kv_heads * D),
                                           vectorSlice(w.v_bias, r * kv_heads * D, kv_heads * D)});
      TXC_ASSIGN_OR_RETURN(uint32_t qkv_bias_index, weights.weight(p + "qkv_bias", qkv_bias, true));
      TXC_ASSIGN_OR_RETURN(uint32_t o_bias_index,
                           weights.weight(p + "o_bias", rowParallelBias(w.o_bias, r), true));
      TXC_ASSIGN_OR_RETURN(uint32_t down_bias_index,
                           weights.weight(p + "down_bias", rowParallelBias(w.down_bias, r), true));

      pb::ValueRef normed = arena.slot(H);
      pb::Launch &ln1 = addLaunch(plan, "txk.rms_norm",
                                  {hidden, PB::weightRef(shared[l][0])}, {normed});
      setFloat(ln1, "eps", 1e-5);

      pb::ValueRef query = arena.slot(heads * D);
      std::vector<pb::ValueRef> qkv_operands = {
          normed, PB::weightRef(qkv_index), PB::weightRef(qkv_bias_index),
          PB::stepInput(pb::STEP_INPUT_POSITIONS),
          PB::stepInput(pb::STEP_INPUT_KV_CACHE, l),
          PB::stepInput(pb::STEP_INPUT_BATCH)};
      if (options.qk_norm) {
        qkv_operands.push_back(PB::weightRef(shared[l][2]));
        qkv_operands.push_back(PB::weightRef(shared[l][3]));
      }
      pb::Launch &qkv = addLaunch(plan, "txk.gemm_rope_append", qkv_operands, {query});
      setString(qkv, "algo", "cpu");
      setInt(qkv, "layer", l);
      setInt(qkv, "num_heads", heads);
      setInt(qkv, "num_kv_heads", kv_heads);
      setInt(qkv, "head_dim", D);
      setFloat(qkv, "rope.theta", 10000.0);
      if (options.rope_scaling != "default") {
        setString(qkv, "rope.scaling", options.rope_scaling);
        setFloat(qkv, "rope.factor", 4.0);
        setInt(qkv, "rope.original_max_position", 16);
        setFloat(qkv, "rope.low_freq_factor", 1.0);
        setFloat(qkv, "rope.high_freq_factor", 4.0);
      }
      if (options.qk_norm)
        setFloat(qkv, "norm_eps", 1e-6);

      pb::ValueRef attended = arena.slot(heads * D);
      pb::Launch &attention = addLaunch(
          plan, "txk.attention",
          {query, PB::stepInput(pb::STEP_INPUT_KV_CACHE, l),
           PB::stepInput(pb::STEP_INPUT_BATCH)},
          {attended});
      setInt(attention, "layer", l);
      setInt(attention, "num_heads", heads);
      setInt(attention, "num_kv_heads", kv_heads);
      setInt(attention, "head_dim", D);
      setFloat(attention, "scale", 1.0 / std::sqrt(static_cast<double>(D)));
      setFlag(attention, "causal");
      setString(attention, "family", "reference");
      if (options.sliding_window > 0)
        setInt(attention, "sliding_window", options.sliding_window);
      if (options.logit_softcap > 0)
        setFloat(attention, "logit_softcap", options.logit_softcap);

      pb::ValueRef after_attention = arena.slot(H);
      pb::Launch &o_proj = addLaunch(
          plan, "txk.gemm",
          {attended, PB::weightRef(o_index), PB::weightRef(o_bias_index), hidden},
          {after_attention});
      setString(o_proj, "epilogue", "residual_add");
      if (tp > 1) {
        setFlag(o_proj, "residual_on_first_rank");
        pb::Launch &reduce = addLaunch(plan, "txk.all_reduce", {after_attention},
                                       {after_attention});
        setInt(reduce, "group_size", tp);
      }

      pb::ValueRef normed2 = arena.slot(H);
      pb::Launch &ln2 = addLaunch(plan, "txk.rms_norm",
                                  {after_attention, PB::weightRef(shared[l][1])},
                                  {normed2});
      setFloat(ln2, "eps", 1e-5);
      pb::ValueRef activated = arena.slot(inter);
      pb::Launch &gate_up = addLaunch(plan, "txk.gemm",
                                      {normed2, PB::weightRef(gu_index)}, {activated});
      setString(gate_up, "epilogue", "swiglu");
      pb::ValueRef after_mlp = arena.slot(H);
      pb::Launch &down = addLaunch(
          plan, "txk.gemm",
          {activated, PB::weightRef(d_index), PB::weightRef(down_bias_index),
           after_attention},
          {after_mlp});
      setString(down, "epilogue", "residual_add");
      if (tp > 1) {
        setFlag(down, "residual_on_first_rank");
        pb::Launch &reduce = addLaunch(plan, "txk.all_reduce", {after_mlp}, {after_mlp});
        setInt(reduce, "group_size", tp);
      }
      hidden = after_mlp;
    }
    pb::ValueRef last = arena.slot(H);
    addLaunch(plan, "txk.gather_last", {hidden, PB::stepInput(pb::STEP_INPUT_BATCH)},
              {last});
    pb::ValueRef last_normed = arena.slot(H);
    pb::Launch &final_ln = addLaunch(plan, "txk.rms_norm",
                                     {last, PB::weightRef(norm_index)}, {last_normed});
    setFloat(final_ln, "eps", 1e-5);
    pb::Launch &logits = addLaunch(plan, "txk.gemm",
                                   {last_normed, PB::weightRef(head_index)},
                                   {PB::stepInput(pb::STEP_INPUT_LOGITS)});
    setString(logits, "epilogue", "none");
    plan.set_arena_bytes(arena.arenaBytes());
    *writer.message().add_plans() = std::move(plan);
  }
  return writer.write(path);
}

} // namespace txc::cpu::testing
