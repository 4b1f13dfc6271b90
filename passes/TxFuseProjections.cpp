//===- TxFuseProjections.cpp - one linear for Q/K/V, one for gate/up ---------===//

#include "dialects/tx/TxOps.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

#define DEBUG_TYPE "tx-fuse-projections"

namespace txc {
#define GEN_PASS_DEF_TXFUSEPROJECTIONSPASS
#include "passes/Passes.h.inc"
} // namespace txc

using namespace mlir;
using namespace txc;

namespace {

/// Linears can share one GEMM when they agree on everything but the number
/// of output features.
bool fusable(tx::LinearOp a, tx::LinearOp b) {
  auto wa = cast<RankedTensorType>(a.getWeight().getType());
  auto wb = cast<RankedTensorType>(b.getWeight().getType());
  return a.getType().getElementType() == b.getType().getElementType() &&
         wa.getElementType() == wb.getElementType() && wa.getDimSize(1) == wb.getDimSize(1) &&
         bool(a.getBias()) == bool(b.getBias());
}

Value concatRows(OpBuilder &builder, Location loc, ArrayRef<Value> parts) {
  auto first = cast<RankedTensorType>(parts.front().getType());
  SmallVector<int64_t> shape(first.getShape());
  shape[0] = 0;
  for (Value part : parts)
    shape[0] += cast<RankedTensorType>(part.getType()).getDimSize(0);
  return tx::ConcatOp::create(builder, loc, first.clone(shape), parts, /*dim=*/0);
}

void fuseGroup(ArrayRef<tx::LinearOp> group) {
  tx::LinearOp first = group.front();
  for (tx::LinearOp linear : group) {
    if (!hoistBefore(linear.getWeight(), first) ||
        (linear.getBias() && !hoistBefore(linear.getBias(), first)))
      return;
  }
  OpBuilder builder(first);
  Location loc = builder.getFusedLoc(llvm::map_to_vector(group, [](tx::LinearOp l) {
    return l.getLoc();
  }));
  SmallVector<Value> weights, biases;
  SmallVector<Type> sliceTypes;
  int64_t width = 0;
  for (tx::LinearOp linear : group) {
    weights.push_back(linear.getWeight());
    if (linear.getBias())
      biases.push_back(linear.getBias());
    sliceTypes.push_back(linear.getType());
    width += linear.getType().getDimSize(1);
  }
  Value weight = concatRows(builder, loc, weights);
  Value bias = biases.empty() ? Value() : concatRows(builder, loc, biases);
  RankedTensorType fusedType = first.getType().clone({first.getType().getDimSize(0), width});
  auto fused = tx::LinearOp::create(builder, loc, fusedType, first.getInput(), weight, bias);
  auto split = tx::SplitOp::create(builder, loc, sliceTypes, fused.getResult(), /*dim=*/1);
  for (auto [linearOp, slice] : llvm::zip(group, split.getResults())) {
    tx::LinearOp linear = linearOp;
    linear.getResult().replaceAllUsesWith(slice);
    linear.erase();
  }
}

struct TxFuseProjectionsPass : txc::impl::TxFuseProjectionsPassBase<TxFuseProjectionsPass> {
  void runOnOperation() override {
    // Group linears by input, keeping program order so the fused linear
    // replaces the first of each group.
    llvm::MapVector<Value, SmallVector<tx::LinearOp>> byInput;
    getOperation().walk([&](tx::LinearOp linear) { byInput[linear.getInput()].push_back(linear); });
    for (auto &entry : byInput) {
      SmallVector<tx::LinearOp> &linears = entry.second;
      while (!linears.empty()) {
        SmallVector<tx::LinearOp> group, rest;
        for (tx::LinearOp linear : linears) {
          if (group.empty() || (fusable(group.front(), linear) &&
                                linear->getBlock() == group.front()->getBlock()))
            group.push_back(linear);
          else
            rest.push_back(linear);
        }
        if (group.size() > 1) {
          llvm::sort(group, [](tx::LinearOp a, tx::LinearOp b) { return a->isBeforeInBlock(b); });
          fuseGroup(group);
        }
        linears = std::move(rest);
      }
    }
  }
};

} // namespace
