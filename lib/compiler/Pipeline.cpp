//===- Pipeline.cpp - run the txc pipeline and summarise its plan ------------===//

#include "txc/Compiler.h"

#include "dialects/tx/TxOps.h"
#include "dialects/txk/TxkOps.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace txc {

namespace {

enum class Stage { TxOnly, Full };

Status run(ModuleOp module, const CompileOptions &options, Stage stage) {
  if (options.target != "cpu" && options.target != "sm_90a")
    return invalidArgument("unknown target '" + options.target + "' (supported: cpu, sm_90a)");
  if (options.tensorParallel < 1)
    return invalidArgument("--tp must be at least 1, got " +
                           std::to_string(options.tensorParallel));
  PassManager pm(module.getContext());
  pm.enableVerifier(options.verifyEach);
  TxcPipelineOptions pipeline;
  pipeline.tp = options.tensorParallel;
  pipeline.maxBatchTokens = options.maxBatchTokens;
  pipeline.maxSeqs = options.maxSeqs;
  pipeline.foldNormWeights = options.foldNormWeights;
  if (stage == Stage::TxOnly)
    buildTxFusionPipeline(pm, pipeline);
  else if (options.target == "cpu")
    buildTxcToCpuPipeline(pm, pipeline);
  else
    buildTxcToCudaPipeline(pm, pipeline);

  // Pass diagnostics become the Status message, one line each.
  std::string messages;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error) {
      llvm::raw_string_ostream os(messages);
      if (!messages.empty())
        os << "; ";
      os << diag.getLocation() << ": " << diag.str();
    }
    return success();
  });
  if (failed(pm.run(module)))
    return invalidArgument(messages.empty() ? "the txc pipeline failed" : messages);
  return Status::ok();
}

} // namespace

Status runPipeline(ModuleOp module, const CompileOptions &options) {
  return run(module, options, Stage::Full);
}

Status runTxPipeline(ModuleOp module, const CompileOptions &options) {
  return run(module, options, Stage::TxOnly);
}

StatusOr<PlanStats> computePlanStats(ModuleOp lowered) {
  PlanStats stats;
  auto step = lowered.lookupSymbol<func::FuncOp>("step");
  if (!step)
    return notFound("the module has no @step function");
  if (auto arena = step->getAttrOfType<IntegerAttr>("txk.arena_size"))
    stats.arenaBytes = arena.getInt();

  SmallVector<int64_t> attentionAt;
  int64_t embeddingAt = -1, gatherAt = -1;
  llvm::StringSet<> seenWeights;
  for (Operation &op : step.getBody().front()) {
    if (auto weight = dyn_cast<tx::WeightOp>(op)) {
      std::string key = weight.getName().str() + "/" + std::to_string(weight.getShardDim().value_or(-1));
      if (seenWeights.insert(key).second) {
        RankedTensorType type = weight.getType();
        stats.weightBytes += type.getNumElements() * type.getElementTypeBitWidth() / 8;
      }
      continue;
    }
    if (!isa<txk::TxkDialect>(op.getDialect()))
      continue;
    if (isa<txk::AttentionOp>(op))
      attentionAt.push_back(stats.launches);
    if (isa<txk::EmbeddingOp>(op) && embeddingAt < 0)
      embeddingAt = stats.launches;
    if (isa<txk::GatherLastOp>(op))
      gatherAt = stats.launches;
    ++stats.launches;
  }
  stats.layers = int64_t(attentionAt.size());
  for (size_t i = 1; i < attentionAt.size(); ++i)
    stats.launchesPerLayer = std::max(stats.launchesPerLayer, attentionAt[i] - attentionAt[i - 1]);
  if (attentionAt.size() == 1 && gatherAt > embeddingAt)
    stats.launchesPerLayer = gatherAt - embeddingAt - 1;
  return stats;
}

} // namespace txc
