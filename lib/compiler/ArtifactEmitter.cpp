//===- ArtifactEmitter.cpp - lowered module -> .txm ---------------------------===//

#include "txc/Compiler.h"

#include "lib/compiler/PlanEmitter.h"
#include "lib/compiler/WeightManifest.h"
#include "runtime/safetensors/Checkpoint.h"
#include "txc/artifact/ArtifactWriter.h"

#include "dialects/tx/TxTypes.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
namespace pb = txc::artifact::pb;

namespace txc {

namespace {

pb::DType cacheDType(func::FuncOp step) {
  for (Type type : step.getArgumentTypes())
    if (auto cache = dyn_cast<tx::KvCacheType>(type)) {
      Type e = cache.getElementType();
      return e.isBF16() ? pb::DTYPE_BF16 : e.isF16() ? pb::DTYPE_F16 : pb::DTYPE_F32;
    }
  return pb::DTYPE_INVALID;
}

} // namespace

Status writeArtifact(ModuleOp lowered, pb::Artifact message, const CompileOptions &options,
                     const WeightOptions &weightOptions, const std::string &path,
                     const std::function<void(const std::string &)> &progress) {
  auto say = [&](const std::string &line) {
    if (progress)
      progress(line);
  };
  auto step = lowered.lookupSymbol<func::FuncOp>("step");
  if (!step)
    return notFound("the module has no @step function");
  int64_t tp = 1;
  if (auto attr = lowered->getAttrOfType<IntegerAttr>("tx.tp"))
    tp = attr.getInt();

  WeightManifest weights;
  for (int64_t rank = 0; rank < tp; ++rank) {
    TXC_ASSIGN_OR_RETURN(pb::Plan plan, emitPlan(step, rank, tp, weights));
    *message.add_plans() = std::move(plan);
  }
  say("planned " + std::to_string(message.plans(0).launches_size()) + " launches x " +
      std::to_string(tp) + " rank(s), " + std::to_string(weights.entries().size()) +
      " weight tensors (" + std::to_string(weights.totalBytes() >> 20) + " MiB)");

  pb::CompileOptions *opts = message.mutable_options();
  opts->set_target(options.target);
  opts->set_tensor_parallel(int32_t(tp));
  opts->set_max_batch_tokens(options.maxBatchTokens);
  opts->set_max_seq_len(options.maxSeqLen);
  opts->set_kv_page_size(options.kvPageSize);
  opts->set_max_num_seqs(options.maxSeqs);
  opts->set_kv_cache_dtype(cacheDType(step));
  opts->set_activation_dtype(cacheDType(step));
  opts->add_passes(options.target == "cpu" ? "txc-to-cpu" : "txc-to-cuda");

  artifact::ArtifactWriter writer(std::move(message));
  std::optional<Checkpoint> checkpoint;
  if (!weightOptions.stripped) {
    TXC_ASSIGN_OR_RETURN(Checkpoint opened, Checkpoint::open(weightOptions.checkpoint));
    checkpoint.emplace(std::move(opened));
  }
  TXC_RETURN_IF_ERROR(weights.addTo(writer, checkpoint ? &*checkpoint : nullptr));
  if (weightOptions.randomSeed)
    writer.setRandomWeights(*weightOptions.randomSeed);
  say("writing " + path);
  return writer.write(path);
}

} // namespace txc
