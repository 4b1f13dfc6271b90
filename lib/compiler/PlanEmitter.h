//===- PlanEmitter.h - txk step function -> artifact plan -------*- C++ -*-===//
//
// Writes one Launch per txk op, following the contract in
// runtime/artifact/FORMAT.md ("How the compiler writes a launch").
//
//===----------------------------------------------------------------------===//

#ifndef TXC_LIB_COMPILER_PLANEMITTER_H
#define TXC_LIB_COMPILER_PLANEMITTER_H

#include "lib/compiler/WeightManifest.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace txc {

/// The plan rank `rank` of `tp` runs, from the planned step function.
StatusOr<artifact::pb::Plan> emitPlan(mlir::func::FuncOp step, int64_t rank, int64_t tp,
                                      WeightManifest &weights);

} // namespace txc

#endif // TXC_LIB_COMPILER_PLANEMITTER_H
