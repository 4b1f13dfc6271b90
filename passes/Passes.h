//===- Passes.h - txc passes ------------------------------------*- C++ -*-===//

#ifndef TXC_PASSES_PASSES_H
#define TXC_PASSES_PASSES_H

#include "dialects/tx/TxDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace txc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// silu(gate) * up -> swiglu(gate, up); used by tx-fuse-swiglu.
void populateTxFuseSwigluPatterns(mlir::RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace txc

#endif // TXC_PASSES_PASSES_H
