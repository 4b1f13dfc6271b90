//===- TxFuseAddRmsNorm.cpp - residual add + RMSNorm in one op ---------------===//

#include "dialects/tx/TxOps.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "tx-fuse-add-rms-norm"

namespace txc {
#define GEN_PASS_DEF_TXFUSEADDRMSNORMPASS
#include "passes/Passes.h.inc"
} // namespace txc

using namespace mlir;
using namespace txc;

namespace {

struct FuseAddRmsNorm : OpRewritePattern<tx::RmsNormOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tx::RmsNormOp norm, PatternRewriter &rewriter) const override {
    auto add = norm.getInput().getDefiningOp<tx::AddOp>();
    if (!add)
      return rewriter.notifyMatchFailure(norm, "input is not a tx.add");
    Value weight = norm.getWeight(); // absent: one group a row
    if (weight && cast<RankedTensorType>(weight.getType()).getDimSize(0) != norm.getType().getDimSize(1))
      return rewriter.notifyMatchFailure(norm, "per-head norm, not a residual-stream norm");
    // The fused op sits where the norm is; every other user of the sum must
    // come after it.
    for (Operation *user : add->getUsers())
      if (user != norm && (user->getBlock() != norm->getBlock() || user->isBeforeInBlock(norm)))
        return rewriter.notifyMatchFailure(norm, "the sum is used before the norm");
    auto fused = tx::AddRmsNormOp::create(rewriter, rewriter.getFusedLoc({add.getLoc(), norm.getLoc()}),
                                          TypeRange{add.getType(), norm.getType()}, add.getLhs(),
                                          add.getRhs(), norm.getWeight(), norm.getEpsAttr());
    rewriter.replaceOp(norm, fused.getNormed());
    rewriter.replaceOp(add, fused.getSum());
    return success();
  }
};

struct TxFuseAddRmsNormPass : txc::impl::TxFuseAddRmsNormPassBase<TxFuseAddRmsNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateTxFuseAddRmsNormPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void txc::populateTxFuseAddRmsNormPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseAddRmsNorm>(patterns.getContext());
}
