//===- InitAllTxc.h - one registration point for txc ------------*- C++ -*-===//
//
// tx-opt, txc, the Python module and tests register dialects and passes
// through these two functions only, so a new dialect or pass is added here
// once and appears everywhere.
//
//===----------------------------------------------------------------------===//

#ifndef TXC_INITALLTXC_H
#define TXC_INITALLTXC_H

#include "dialects/tx/TxDialect.h"
#include "dialects/txk/TxkDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace txc {

/// Registers every dialect a txc module may contain.
inline void registerAllTxcDialects(mlir::DialectRegistry &registry) {
  registry.insert<tx::TxDialect, txk::TxkDialect, mlir::func::FuncDialect>();
}

/// Registers every txc pass and pipeline, plus the upstream passes the
/// pipelines use, with the global pass registry.
inline void registerAllTxcPasses() {
  registerTxcPasses();
  registerTxcPipelines();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
}

} // namespace txc

#endif // TXC_INITALLTXC_H
