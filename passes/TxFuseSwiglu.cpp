//===- TxFuseSwiglu.cpp - silu(gate) * up -> tx.swiglu -----------------------===//

#include "dialects/tx/TxOps.h"
#include "passes/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "tx-fuse-swiglu"

namespace txc {
#define GEN_PASS_DEF_TXFUSESWIGLUPASS
#include "passes/Passes.h.inc"
} // namespace txc

using namespace mlir;
using namespace txc;

namespace {

struct FuseSiluMul : OpRewritePattern<tx::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tx::MulOp mul, PatternRewriter &rewriter) const override {
    for (auto [gateSide, upSide] : {std::pair{mul.getLhs(), mul.getRhs()},
                                    std::pair{mul.getRhs(), mul.getLhs()}}) {
      auto silu = gateSide.getDefiningOp<tx::SiluOp>();
      // A silu with other users must stay, and fusing would compute it twice.
      if (!silu || !silu->hasOneUse())
        continue;
      rewriter.replaceOpWithNewOp<tx::SwigluOp>(mul, mul.getType(), silu.getInput(), upSide);
      rewriter.eraseOp(silu);
      return success();
    }
    return rewriter.notifyMatchFailure(mul, "no single-use tx.silu operand");
  }
};

struct TxFuseSwigluPass : txc::impl::TxFuseSwigluPassBase<TxFuseSwigluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateTxFuseSwigluPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void txc::populateTxFuseSwigluPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseSiluMul>(patterns.getContext());
}
