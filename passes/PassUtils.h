//===- PassUtils.h - helpers shared by the txc passes -----------*- C++ -*-===//

#ifndef TXC_PASSES_PASSUTILS_H
#define TXC_PASSES_PASSUTILS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace txc {

/// Makes `value` available right before `point`. Values defined by ops
/// without operands (tx.weight) are hoisted there when they come later;
/// returns false when `value` cannot be made to dominate `point`.
inline bool hoistBefore(mlir::Value value, mlir::Operation *point) {
  mlir::Operation *def = value.getDefiningOp();
  if (!def)
    return true; // block argument
  if (def->getBlock() != point->getBlock())
    return def->getBlock()->getParentOp()->isProperAncestor(point);
  if (def->isBeforeInBlock(point))
    return true;
  if (def->getNumOperands() != 0 || def->getNumRegions() != 0)
    return false;
  def->moveBefore(point);
  return true;
}

} // namespace txc

#endif // TXC_PASSES_PASSUTILS_H
