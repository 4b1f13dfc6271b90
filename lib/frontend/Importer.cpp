//===- Importer.cpp - A Hugging Face model directory as a tx module -------===//
//
// The graph is transformers' LlamaDecoderLayer, unfused, one op per step of
// the math; the tx-fuse-* passes do the fusing. Per layer:
//
//   x = rms_norm(h); q, k, v = linear(x) (+ bias)
//   [q, k = rms_norm per head]                   (Qwen3)
//   q, k = rotary(q, k); a = attention(q, k, v)  (causal, [sliding window])
//   h = h + linear(a); y = rms_norm(h)
//   h = h + down(silu(gate(y)) * up(y))
//
// then logits = lm_head(rms_norm(gather_last(h))).
//
//===----------------------------------------------------------------------===//

#include "lib/frontend/Importer.h"

#include "dialects/tx/TxDialect.h"
#include "dialects/tx/TxOps.h"
#include "lib/frontend/ArchitectureTable.h"
#include "lib/frontend/CheckpointCheck.h"
#include "lib/frontend/ConfigParser.h"
#include "runtime/safetensors/StrictJson.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <cmath>

namespace txc::frontend {

namespace {

using namespace mlir;

StatusOr<Type> elementTypeOf(Builder &builder, DType dtype, const CheckpointTensor &tensor) {
  switch (dtype) {
  case DType::kBF16:
    return Type(builder.getBF16Type());
  case DType::kF16:
    return Type(builder.getF16Type());
  case DType::kF32:
    return Type(builder.getF32Type());
  default:
    return unimplemented(tensor.filePath() + ": tensor " + quoteForMessage(tensor.name()) +
                         ": dtype " + std::string(dtypeName(dtype)) + " has no tx element type");
  }
}

tx::RopeScaling ropeScalingOf(RopeScalingType type) {
  switch (type) {
  case RopeScalingType::kDefault:
    return tx::RopeScaling::Default;
  case RopeScalingType::kLinear:
    return tx::RopeScaling::Linear;
  case RopeScalingType::kDynamic:
    return tx::RopeScaling::Dynamic;
  case RopeScalingType::kLlama3:
    return tx::RopeScaling::Llama3;
  case RopeScalingType::kYarn:
    return tx::RopeScaling::Yarn;
  }
  return tx::RopeScaling::Default;
}

/// Builds the body of @step, one layer at a time.
class StepBuilder {
public:
  StepBuilder(MLIRContext &context, const ModelConfig &config, const Checkpoint &checkpoint,
              const ImportOptions &options)
      : context_(context), builder_(&context), config_(config), checkpoint_(checkpoint),
        options_(options) {}

  StatusOr<OwningOpRef<ModuleOp>> build();

private:
  /// `tx.weight "name"`, typed from the checkpoint header.
  StatusOr<Value> weight(const std::string &name);
  /// A weight that a projection consumes: it must share the activations'
  /// dtype, since tx.linear multiplies like with like.
  StatusOr<Value> projectionWeight(const std::string &name);
  /// The bias named `name` when `present`, else a null Value.
  StatusOr<Value> optionalBias(bool present, const std::string &name);
  StatusOr<Value> linear(Value input, const std::string &weightName, bool hasBias,
                         const std::string &biasName, Type resultElement = {});
  StatusOr<Value> rmsNorm(Value input, const std::string &weightName);
  StatusOr<tx::RopeAttr> ropeAttr();
  StatusOr<Value> decoderLayer(int64_t layer, Value hidden);

  RankedTensorType activations(int64_t width, Type element = {}) {
    return RankedTensorType::get({ShapedType::kDynamic, width}, element ? element : activation_);
  }

  MLIRContext &context_;
  OpBuilder builder_;
  const ModelConfig &config_;
  const Checkpoint &checkpoint_;
  const ImportOptions &options_;

  Location loc_ = UnknownLoc::get(&context_);
  Type activation_;
  Value tokens_, positions_, batch_, cache_;
  tx::RopeAttr rope_;
};

StatusOr<Value> StepBuilder::weight(const std::string &name) {
  const CheckpointTensor *tensor = checkpoint_.find(name);
  if (!tensor)
    return notFound(checkpoint_.source() + ": tensor " + quoteForMessage(name) + " is missing");
  TXC_ASSIGN_OR_RETURN(Type element,
                       elementTypeOf(builder_, options_.computeDType.value_or(tensor->dtype()),
                                     *tensor));
  auto type = RankedTensorType::get(tensor->shape(), element);
  return Value(tx::WeightOp::create(builder_, loc_, type, name, /*shard_dim=*/nullptr,
                                    /*shard_parts=*/nullptr));
}

StatusOr<Value> StepBuilder::projectionWeight(const std::string &name) {
  TXC_ASSIGN_OR_RETURN(Value value, weight(name));
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  if (element != activation_) {
    const CheckpointTensor *tensor = checkpoint_.find(name);
    std::string expected = activation_.isBF16() ? "BF16" : activation_.isF16() ? "F16" : "F32";
    return unimplemented(tensor->filePath() + ": tensor " + quoteForMessage(name) + " is " +
                         std::string(dtypeName(tensor->dtype())) +
                         " but the embedding, and so the activations, are " + expected +
                         "; txc needs one dtype for all projections");
  }
  return value;
}

StatusOr<Value> StepBuilder::optionalBias(bool present, const std::string &name) {
  if (!present)
    return Value();
  return projectionWeight(name);
}

StatusOr<Value> StepBuilder::linear(Value input, const std::string &weightName, bool hasBias,
                                    const std::string &biasName, Type resultElement) {
  TXC_ASSIGN_OR_RETURN(Value w, projectionWeight(weightName));
  TXC_ASSIGN_OR_RETURN(Value b, optionalBias(hasBias, biasName));
  int64_t outFeatures = cast<RankedTensorType>(w.getType()).getDimSize(0);
  return Value(
      tx::LinearOp::create(builder_, loc_, activations(outFeatures, resultElement), input, w, b));
}

StatusOr<Value> StepBuilder::rmsNorm(Value input, const std::string &weightName) {
  TXC_ASSIGN_OR_RETURN(Value w, weight(weightName));
  return Value(tx::RmsNormOp::create(builder_, loc_, input.getType(), input, w,
                                     builder_.getF64FloatAttr(config_.rmsNormEps)));
}

StatusOr<tx::RopeAttr> StepBuilder::ropeAttr() {
  const RopeConfig &rope = config_.rope;
  std::string problem;
  auto emitErrorAtLoc = [&]() { return mlir::emitError(loc_); };
  // Exact parameter types, so the generated getChecked is chosen over
  // StorageUserBase's template.
  llvm::function_ref<InFlightDiagnostic()> emitError = emitErrorAtLoc;
  // Capture the attribute verifier's message instead of printing it.
  ScopedDiagnosticHandler capture(&context_, [&](Diagnostic &diagnostic) {
    problem = diagnostic.str();
    return success();
  });
  tx::RopeAttr attr = tx::RopeAttr::getChecked(
      emitError, &context_, APFloat(rope.theta), ropeScalingOf(rope.scaling), APFloat(rope.factor),
      // The attribute's defaults for the parameters a scaling does not use,
      // so the printed attribute shows only what matters.
      APFloat(rope.scaling == RopeScalingType::kLlama3 ? rope.lowFreqFactor : 1.0),
      APFloat(rope.scaling == RopeScalingType::kLlama3 ? rope.highFreqFactor : 4.0),
      rope.scaling == RopeScalingType::kDefault || rope.scaling == RopeScalingType::kLinear
          ? int64_t(0)
          : rope.originalMaxPositionEmbeddings,
      APFloat(rope.scaling == RopeScalingType::kYarn ? rope.betaFast : 32.0),
      APFloat(rope.scaling == RopeScalingType::kYarn ? rope.betaSlow : 1.0),
      APFloat(rope.scaling == RopeScalingType::kYarn ? rope.attentionFactor : 0.0),
      /*rotary_dim=*/int64_t(0));
  if (!attr)
    return invalidArgument("config.json: rope parameters rejected by tx.rope: " + problem);
  if (rope.scaling == RopeScalingType::kYarn && !rope.truncate)
    return unimplemented("config.json: yarn with truncate = false is not supported (tx.rope has "
                         "no truncate parameter)");
  return attr;
}

StatusOr<Value> StepBuilder::decoderLayer(int64_t layer, Value hidden) {
  std::string prefix = "model.layers." + std::to_string(layer) + ".";
  loc_ = NameLoc::get(builder_.getStringAttr(prefix.substr(0, prefix.size() - 1)));
  const ModelConfig &c = config_;

  TXC_ASSIGN_OR_RETURN(Value x, rmsNorm(hidden, prefix + "input_layernorm.weight"));
  std::string attn = prefix + "self_attn.";
  TXC_ASSIGN_OR_RETURN(Value q, linear(x, attn + "q_proj.weight", c.qkvBias, attn + "q_proj.bias"));
  TXC_ASSIGN_OR_RETURN(Value k, linear(x, attn + "k_proj.weight", c.qkvBias, attn + "k_proj.bias"));
  TXC_ASSIGN_OR_RETURN(Value v, linear(x, attn + "v_proj.weight", c.qkvBias, attn + "v_proj.bias"));
  if (c.qkNorm) {
    // A head_dim-sized weight makes tx.rms_norm normalise each head alone.
    TXC_ASSIGN_OR_RETURN(q, rmsNorm(q, attn + "q_norm.weight"));
    TXC_ASSIGN_OR_RETURN(k, rmsNorm(k, attn + "k_norm.weight"));
  }
  IntegerAttr headDim = builder_.getI64IntegerAttr(c.headDim);
  q = tx::RotaryOp::create(builder_, loc_, q.getType(), q, positions_, headDim, rope_);
  k = tx::RotaryOp::create(builder_, loc_, k.getType(), k, positions_, headDim, rope_);
  int64_t window = c.slidingWindows[layer];
  Value attended = tx::AttentionOp::create(
      builder_, loc_, q.getType(), q, k, v, cache_, batch_, builder_.getI64IntegerAttr(layer),
      builder_.getI64IntegerAttr(c.numHeads), builder_.getI64IntegerAttr(c.numKvHeads), headDim,
      builder_.getF64FloatAttr(1.0 / std::sqrt(double(c.headDim))), builder_.getUnitAttr(),
      window > 0 ? builder_.getI64IntegerAttr(window) : IntegerAttr(),
      /*logit_softcap=*/FloatAttr());
  TXC_ASSIGN_OR_RETURN(
      Value o, linear(attended, attn + "o_proj.weight", c.outputProjBias, attn + "o_proj.bias"));
  hidden = tx::AddOp::create(builder_, loc_, hidden, o);

  TXC_ASSIGN_OR_RETURN(Value y, rmsNorm(hidden, prefix + "post_attention_layernorm.weight"));
  std::string mlp = prefix + "mlp.";
  TXC_ASSIGN_OR_RETURN(Value gate,
                       linear(y, mlp + "gate_proj.weight", c.mlpBias, mlp + "gate_proj.bias"));
  TXC_ASSIGN_OR_RETURN(Value up,
                       linear(y, mlp + "up_proj.weight", c.mlpBias, mlp + "up_proj.bias"));
  Value activated = tx::SiluOp::create(builder_, loc_, gate);
  Value product = tx::MulOp::create(builder_, loc_, activated, up);
  TXC_ASSIGN_OR_RETURN(
      Value down, linear(product, mlp + "down_proj.weight", c.mlpBias, mlp + "down_proj.bias"));
  return Value(tx::AddOp::create(builder_, loc_, hidden, down));
}

StatusOr<OwningOpRef<ModuleOp>> StepBuilder::build() {
  context_.loadDialect<tx::TxDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc_);
  builder_.setInsertionPointToEnd(module->getBody());

  const CheckpointTensor *embedding = checkpoint_.find("model.embed_tokens.weight");
  if (!embedding)
    return notFound(checkpoint_.source() + ": tensor 'model.embed_tokens.weight' is missing");
  TXC_ASSIGN_OR_RETURN(activation_,
                       elementTypeOf(builder_, options_.computeDType.value_or(embedding->dtype()),
                                     *embedding));
  TXC_ASSIGN_OR_RETURN(rope_, ropeAttr());

  // What the compiler and runtime need from config.json beyond the graph.
  module->getOperation()->setAttr("tx.architecture",
                                  builder_.getStringAttr(config_.architectureName()));
  module->getOperation()->setAttr("tx.max_position_embeddings",
                                  builder_.getI64IntegerAttr(config_.maxPositionEmbeddings));
  if (config_.bosTokenId)
    module->getOperation()->setAttr("tx.bos_token_id",
                                    builder_.getI64IntegerAttr(*config_.bosTokenId));
  module->getOperation()->setAttr("tx.eos_token_ids",
                                  builder_.getDenseI64ArrayAttr(config_.eosTokenIds));

  auto tokenIds = RankedTensorType::get({ShapedType::kDynamic}, builder_.getI32Type());
  auto cacheType = tx::KvCacheType::get(&context_, config_.numLayers, config_.numKvHeads,
                                        config_.headDim, options_.kvPageSize, activation_);
  auto logitsType = activations(config_.vocabSize, builder_.getF32Type());
  auto stepType = builder_.getFunctionType(
      {tokenIds, tokenIds, tx::BatchType::get(&context_), cacheType}, {logitsType});
  auto step = func::FuncOp::create(builder_, loc_, "step", stepType);
  Block *entry = step.addEntryBlock();
  builder_.setInsertionPointToStart(entry);
  tokens_ = entry->getArgument(0);
  positions_ = entry->getArgument(1);
  batch_ = entry->getArgument(2);
  cache_ = entry->getArgument(3);

  TXC_ASSIGN_OR_RETURN(Value table, weight("model.embed_tokens.weight"));
  Value hidden =
      tx::EmbeddingOp::create(builder_, loc_, activations(config_.hiddenSize), tokens_, table);
  for (int64_t layer = 0; layer < config_.numLayers; ++layer) {
    TXC_ASSIGN_OR_RETURN(hidden, decoderLayer(layer, hidden));
  }

  loc_ = NameLoc::get(builder_.getStringAttr("lm_head"));
  Value last = tx::GatherLastOp::create(builder_, loc_, hidden.getType(), hidden, batch_);
  TXC_ASSIGN_OR_RETURN(Value normed, rmsNorm(last, "model.norm.weight"));
  // Tied models read the embedding table, whatever lm_head.weight holds.
  std::string headName = config_.tieWordEmbeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  TXC_ASSIGN_OR_RETURN(Value logits, linear(normed, headName, false, "", builder_.getF32Type()));
  func::ReturnOp::create(builder_, loc_, logits);

  std::string problem;
  ScopedDiagnosticHandler capture(&context_, [&](Diagnostic &diagnostic) {
    if (problem.empty())
      problem = diagnostic.str();
    return success();
  });
  if (failed(verify(*module)))
    return internalError("the imported tx module does not verify (a frontend bug): " + problem);
  return module;
}

} // namespace

StatusOr<OwningOpRef<ModuleOp>> buildStepModule(MLIRContext &context, const ModelConfig &config,
                                                const Checkpoint &checkpoint,
                                                const ImportOptions &options) {
  return StepBuilder(context, config, checkpoint, options).build();
}

StatusOr<OwningOpRef<ModuleOp>> importModel(MLIRContext &context, const std::string &modelDirectory,
                                            const ImportOptions &options,
                                            std::vector<Status> *allProblems) {
  auto fail = [&](Status status) {
    if (allProblems)
      allProblems->push_back(status);
    return status;
  };
  std::string directory = modelDirectory;
  while (directory.size() > 1 && directory.back() == '/')
    directory.pop_back();
  StatusOr<ModelConfig> config = loadModelConfig(directory + "/config.json");
  if (!config.isOk())
    return fail(config.status());
  StatusOr<Checkpoint> checkpoint = Checkpoint::open(directory);
  if (!checkpoint.isOk())
    return fail(checkpoint.status());
  std::vector<Status> problems = checkCheckpointAgainstConfig(config.value(), checkpoint.value());
  if (!problems.empty()) {
    if (allProblems)
      allProblems->insert(allProblems->end(), problems.begin(), problems.end());
    return problems.front();
  }
  StatusOr<OwningOpRef<ModuleOp>> module =
      buildStepModule(context, config.value(), checkpoint.value(), options);
  if (!module.isOk())
    return fail(module.status());
  return module;
}

} // namespace txc::frontend
