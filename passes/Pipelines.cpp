//===- Pipelines.cpp - txc-to-cuda and txc-to-cpu -----------------------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace txc {

void buildTxFusionPipeline(OpPassManager &pm, const TxcPipelineOptions &options) {
  pm.addPass(createCanonicalizerPass());
  // Sharding reads the unfused projections, so it runs first.
  pm.addPass(createTxShardPass(TxShardPassOptions{options.tp}));
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createTxFuseProjectionsPass());
  fn.addPass(createTxFuseSwigluPass());
  fn.addPass(createTxFuseAddRmsNormPass());
  fn.addPass(createTxFuseRotaryPass());
  // After the fusions: the norms are whole-row ones feeding fused linears.
  if (options.foldNormWeights)
    fn.addPass(createTxFoldNormWeightPass());
  fn.addPass(createCanonicalizerPass());
}

static void buildPipeline(OpPassManager &pm, const TxcPipelineOptions &options,
                          StringRef target) {
  buildTxFusionPipeline(pm, options);
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createConvertTxToTxkPass(ConvertTxToTxkPassOptions{target.str()}));
  fn.addPass(createCSEPass());
  fn.addPass(createTxkPlanMemoryPass(
      TxkPlanMemoryPassOptions{options.maxBatchTokens, options.maxSeqs}));
}

void buildTxcToCudaPipeline(OpPassManager &pm, const TxcPipelineOptions &options) {
  buildPipeline(pm, options, "sm_90a");
}

void buildTxcToCpuPipeline(OpPassManager &pm, const TxcPipelineOptions &options) {
  buildPipeline(pm, options, "cpu");
}

void registerTxcPipelines() {
  PassPipelineRegistration<TxcPipelineOptions>(
      "txc-to-cuda", "Fuse, shard and lower tx to txk for sm_90a, then plan memory",
      buildTxcToCudaPipeline);
  PassPipelineRegistration<TxcPipelineOptions>(
      "txc-to-cpu", "Fuse, shard and lower tx to txk for the CPU backend, then plan memory",
      buildTxcToCpuPipeline);
}

} // namespace txc
