//===- TxFoldNormWeight.cpp - an RMSNorm's weight into the linears after it ===//
//
// The decode GEMV that takes a deferred norm reads, after its wait, the
// norm's input and its weight, as many bytes as its own weight slice (device
// run 85, bench/RUNLOG.md). With the weight folded into the GEMV's weights
// it reads the input alone: device run 92 measured Llama-3-8B b1 -0.19 ms
// (gate/up -4.9 us a layer) and Qwen3-0.6B -0.025 ms.
//
//===----------------------------------------------------------------------===//

#include "dialects/tx/TxOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "tx-fold-norm-weight"

namespace txc {
#define GEN_PASS_DEF_TXFOLDNORMWEIGHTPASS
#include "passes/Passes.h.inc"
} // namespace txc

using namespace mlir;
using namespace txc;

namespace {

/// A weight the manifest stores: a checkpoint tensor or a concatenation.
bool storable(Value weight) {
  return weight.getDefiningOp<tx::WeightOp>() || weight.getDefiningOp<tx::ConcatOp>();
}

/// The linears that read `normed` as their input, in block order, if every
/// user of `normed` is one, each in `norm`'s block, and each weight is
/// storable, of the norm weight's element type, and read by these linears
/// only. Empty otherwise.
SmallVector<tx::LinearOp> foldTargets(Operation *norm, Value normed, Type weightElement) {
  SmallVector<tx::LinearOp> linears;
  for (OpOperand &use : normed.getUses()) {
    auto linear = dyn_cast<tx::LinearOp>(use.getOwner());
    if (!linear || use.get() != linear.getInput() || linear.getWeight() == normed ||
        linear->getBlock() != norm->getBlock())
      return {};
    linears.push_back(linear);
  }
  for (tx::LinearOp linear : linears) {
    Value weight = linear.getWeight();
    if (!storable(weight) ||
        cast<RankedTensorType>(weight.getType()).getElementType() != weightElement)
      return {};
    for (Operation *user : weight.getUsers())
      if (!llvm::is_contained(linears, user))
        return {};
  }
  llvm::sort(linears, [](tx::LinearOp a, tx::LinearOp b) { return a->isBeforeInBlock(b); });
  return linears;
}

/// Moves `norm`'s weight (`weight`, empty if it has none) into the linears
/// that read `normed`, where every one of them can take it.
void fold(Operation *norm, MutableOperandRange weight, Value normed) {
  if (weight.empty())
    return;
  Value gamma = weight[0].get();
  auto gammaType = cast<RankedTensorType>(gamma.getType());
  auto normedType = cast<RankedTensorType>(normed.getType());
  if (!gamma.getDefiningOp<tx::WeightOp>() || gammaType.getDimSize(0) != normedType.getDimSize(1))
    return; // a per-head norm, or a weight the manifest cannot name
  SmallVector<tx::LinearOp> linears = foldTargets(norm, normed, gammaType.getElementType());
  if (linears.empty())
    return;
  llvm::DenseMap<Value, Value> scaled; // each weight scaled once
  for (tx::LinearOp linear : linears) {
    Value linearWeight = linear.getWeight();
    Value &folded = scaled[linearWeight];
    if (!folded) {
      OpBuilder builder(linear); // the first (in block order) to read it
      folded = tx::ScaleColumnsOp::create(builder, linear.getLoc(), linearWeight.getType(),
                                          linearWeight, gamma);
    }
    linear.getWeightMutable().assign(folded);
  }
  weight.clear();
}

struct TxFoldNormWeightPass : txc::impl::TxFoldNormWeightPassBase<TxFoldNormWeightPass> {
  void runOnOperation() override {
    getOperation().walk([](Operation *op) {
      if (auto norm = dyn_cast<tx::RmsNormOp>(op))
        fold(norm, norm.getWeightMutable(), norm.getResult());
      else if (auto norm = dyn_cast<tx::AddRmsNormOp>(op))
        fold(norm, norm.getWeightMutable(), norm.getNormed());
    });
  }
};

} // namespace
