//===- TxFuseRotary.cpp - rotary + q/k norm + KV append in one op ------------===//

#include "dialects/tx/TxOps.h"
#include "passes/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "tx-fuse-rotary"

namespace txc {
#define GEN_PASS_DEF_TXFUSEROTARYPASS
#include "passes/Passes.h.inc"
} // namespace txc

using namespace mlir;
using namespace txc;

namespace {

/// A per-head RMSNorm (weight of head_dim elements) used only by `user`.
tx::RmsNormOp perHeadNorm(Value v, int64_t headDim) {
  auto norm = v.getDefiningOp<tx::RmsNormOp>();
  if (!norm || !norm->hasOneUse() || !norm.getWeight() ||
      cast<RankedTensorType>(norm.getWeight().getType()).getDimSize(0) != headDim)
    return {};
  return norm;
}

struct FuseRotaryIntoAppend : OpRewritePattern<tx::AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tx::AttentionOp attention,
                                PatternRewriter &rewriter) const override {
    auto qRot = attention.getQuery().getDefiningOp<tx::RotaryOp>();
    auto kRot = attention.getKey().getDefiningOp<tx::RotaryOp>();
    if (!qRot || !kRot)
      return rewriter.notifyMatchFailure(attention, "query or key is not rotated here");
    if (!qRot->hasOneUse() || !kRot->hasOneUse())
      return rewriter.notifyMatchFailure(attention, "a rotary result has other users");
    if (qRot.getRope() != kRot.getRope() || qRot.getPositions() != kRot.getPositions() ||
        qRot.getHeadDim() != attention.getHeadDim() || kRot.getHeadDim() != attention.getHeadDim())
      return rewriter.notifyMatchFailure(attention, "query and key rotate differently");

    Value query = qRot.getInput(), key = kRot.getInput();
    Value qNorm, kNorm;
    FloatAttr normEps;
    tx::RmsNormOp qn = perHeadNorm(query, attention.getHeadDim());
    tx::RmsNormOp kn = perHeadNorm(key, attention.getHeadDim());
    if (qn && kn && qn.getEps() == kn.getEps()) {
      query = qn.getInput();
      key = kn.getInput();
      qNorm = qn.getWeight();
      kNorm = kn.getWeight();
      normEps = qn.getEpsAttr();
    }

    Location loc = rewriter.getFusedLoc({qRot.getLoc(), kRot.getLoc(), attention.getLoc()});
    auto append = tx::RopeAppendOp::create(
        rewriter, loc, query.getType(), query, key, attention.getValue(), qRot.getPositions(),
        attention.getCache(), attention.getBatch(), qNorm, kNorm, attention.getLayerAttr(),
        attention.getNumHeadsAttr(), attention.getNumKvHeadsAttr(), attention.getHeadDimAttr(),
        qRot.getRopeAttr(), normEps);
    rewriter.replaceOpWithNewOp<tx::PagedAttentionOp>(
        attention, attention.getType(), append.getResult(), attention.getCache(),
        attention.getBatch(), attention.getLayerAttr(), attention.getNumHeadsAttr(),
        attention.getNumKvHeadsAttr(), attention.getHeadDimAttr(), attention.getScaleAttr(),
        attention.getCausalAttr(), attention.getSlidingWindowAttr(),
        attention.getLogitSoftcapAttr());
    rewriter.eraseOp(qRot);
    rewriter.eraseOp(kRot);
    if (qNorm) {
      rewriter.eraseOp(qn);
      rewriter.eraseOp(kn);
    }
    return success();
  }
};

struct TxFuseRotaryPass : txc::impl::TxFuseRotaryPassBase<TxFuseRotaryPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateTxFuseRotaryPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void txc::populateTxFuseRotaryPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseRotaryIntoAppend>(patterns.getContext());
}
