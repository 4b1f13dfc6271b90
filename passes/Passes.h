//===- Passes.h - txc passes ------------------------------------*- C++ -*-===//

#ifndef TXC_PASSES_PASSES_H
#define TXC_PASSES_PASSES_H

#include "dialects/tx/TxDialect.h"
#include "dialects/txk/TxkDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace txc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// silu(gate) * up -> swiglu(gate, up); used by tx-fuse-swiglu.
void populateTxFuseSwigluPatterns(mlir::RewritePatternSet &patterns);

/// rms_norm(add(a, b)) -> add_rms_norm(a, b); used by tx-fuse-add-rms-norm.
void populateTxFuseAddRmsNormPatterns(mlir::RewritePatternSet &patterns);

/// attention(rotary(q), rotary(k), v) -> rope_append + paged_attention.
void populateTxFuseRotaryPatterns(mlir::RewritePatternSet &patterns);

/// Options of the txc-to-cuda and txc-to-cpu pipelines.
struct TxcPipelineOptions : mlir::PassPipelineOptions<TxcPipelineOptions> {
  Option<int64_t> tp{*this, "tp", llvm::cl::desc("tensor-parallel ranks"), llvm::cl::init(1)};
  Option<int64_t> maxBatchTokens{*this, "max-batch-tokens",
                                 llvm::cl::desc("most tokens in one step"), llvm::cl::init(2048)};
  Option<int64_t> maxSeqs{*this, "max-seqs", llvm::cl::desc("most sequences in one step"),
                          llvm::cl::init(256)};
  Option<bool> foldNormWeights{*this, "fold-norm-weights",
                               llvm::cl::desc("run tx-fold-norm-weight"), llvm::cl::init(true)};
};

/// The target-independent half: canonicalize, shard (tp > 1), fuse.
void buildTxFusionPipeline(mlir::OpPassManager &pm, const TxcPipelineOptions &options);
/// tx -> fused, sharded tx -> txk with sm_90a tactics -> planned memory.
void buildTxcToCudaPipeline(mlir::OpPassManager &pm, const TxcPipelineOptions &options);
/// The same for the CPU reference backend.
void buildTxcToCpuPipeline(mlir::OpPassManager &pm, const TxcPipelineOptions &options);
/// Registers txc-to-cuda and txc-to-cpu.
void registerTxcPipelines();

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace txc

#endif // TXC_PASSES_PASSES_H
