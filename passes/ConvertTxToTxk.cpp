//===- ConvertTxToTxk.cpp - tx -> txk with per-target tactics ----------------===//
//
// Two phases. The first matches the multi-op shapes that become one launch
// (a GEMM with a residual or SwiGLU epilogue, rope_append over the packed
// QKV projection) while their producers are still tx; the second lowers
// what is left one to one. Weights and their concatenations stay tx: they
// are data the artifact writer materialises, not launches.
//
//===----------------------------------------------------------------------===//

#include "dialects/tx/TxOps.h"
#include "dialects/txk/TxkOps.h"
#include "passes/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "convert-tx-to-txk"

namespace txc {
#define GEN_PASS_DEF_CONVERTTXTOTXKPASS
#include "passes/Passes.h.inc"
} // namespace txc

using namespace mlir;
using namespace txc;

namespace {

/// What the target decides; one place per tactic.
struct Tactics {
  bool cuda;
  StringRef gemmAlgo(txk::GemmEpilogue epilogue) const {
    if (!cuda)
      return "cpu";
    // cuBLASLt has bias and beta*C (the residual) epilogues but no SwiGLU.
    return epilogue == txk::GemmEpilogue::Swiglu ? "sm90_fused" : "cublaslt";
  }
  txk::AttentionFamily attentionFamily() const {
    return cuda ? txk::AttentionFamily::Sm90Prefill : txk::AttentionFamily::Reference;
  }
  /// FA3's choice on Hopper: 128x128 tiles up to d128; d256 needs the
  /// shared memory of a 128x64 K/V tile.
  std::pair<int64_t, int64_t> attentionTiles(int64_t headDim) const {
    if (!cuda)
      return {0, 0};
    return {128, headDim > 128 ? 64 : 128};
  }
};

/// A linear whose only user is `user`.
tx::LinearOp soleLinearProducer(Value v, Operation *user) {
  auto linear = v.getDefiningOp<tx::LinearOp>();
  if (!linear || !linear->hasOneUse() || *linear->getUsers().begin() != user)
    return {};
  return linear;
}

txk::GemmOp createGemm(PatternRewriter &rewriter, Location loc, Type resultType,
                       tx::LinearOp linear, Value residual, txk::GemmEpilogue epilogue,
                       const Tactics &tactics, bool residualOnFirstRank = false) {
  return txk::GemmOp::create(
      rewriter, loc, resultType, linear.getInput(), linear.getWeight(), linear.getBias(), residual,
      txk::GemmEpilogueAttr::get(rewriter.getContext(), epilogue),
      rewriter.getStringAttr(tactics.gemmAlgo(epilogue)), DenseI64ArrayAttr(),
      residualOnFirstRank ? rewriter.getUnitAttr() : UnitAttr());
}

/// The residual add of `residual + b`, folded into the GEMM that makes `b`:
/// `b = linear(x)` gives gemm(x) + residual; `b = all_reduce(linear(x))`
/// (a row-parallel projection) gives all_reduce(gemm(x) + residual on rank
/// 0 only). Returns the sum, or null when `b` is not of either form.
Value foldResidualIntoGemm(PatternRewriter &rewriter, Operation *add, Value residual, Value b,
                           Type type, const Tactics &tactics) {
  if (tx::LinearOp linear = soleLinearProducer(b, add)) {
    Value sum = createGemm(rewriter, add->getLoc(), type, linear, residual,
                           txk::GemmEpilogue::ResidualAdd, tactics);
    rewriter.eraseOp(linear);
    return sum;
  }
  auto reduce = b.getDefiningOp<tx::AllReduceOp>();
  if (!reduce || !reduce->hasOneUse())
    return {};
  tx::LinearOp linear = soleLinearProducer(reduce.getInput(), reduce);
  if (!linear)
    return {};
  Value partial = createGemm(rewriter, add->getLoc(), type, linear, residual,
                             txk::GemmEpilogue::ResidualAdd, tactics, /*residualOnFirstRank=*/true);
  Value sum = txk::AllReduceOp::create(rewriter, reduce.getLoc(), type, partial,
                                       reduce.getGroupSizeAttr());
  rewriter.eraseOp(reduce);
  rewriter.eraseOp(linear);
  return sum;
}

//===----------------------------------------------------------------------===//
// Phase 1: multi-op shapes
//===----------------------------------------------------------------------===//

/// add(residual, linear(x)) -> gemm(x) with a residual_add epilogue.
struct AddOfLinear : OpRewritePattern<tx::AddOp> {
  AddOfLinear(MLIRContext *ctx, Tactics tactics) : OpRewritePattern(ctx), tactics(tactics) {}
  LogicalResult matchAndRewrite(tx::AddOp add, PatternRewriter &rewriter) const override {
    for (auto [a, b] : {std::pair{add.getLhs(), add.getRhs()}, std::pair{add.getRhs(), add.getLhs()}})
      if (Value sum = foldResidualIntoGemm(rewriter, add, a, b, add.getType(), tactics)) {
        rewriter.replaceOp(add, sum);
        return success();
      }
    return rewriter.notifyMatchFailure(add, "no single-use linear operand");
  }
  Tactics tactics;
};

/// add_rms_norm(residual, linear(x)) -> gemm(x) + residual, then rms_norm;
/// otherwise the fused add_rms_norm kernel.
struct LowerAddRmsNorm : OpRewritePattern<tx::AddRmsNormOp> {
  LowerAddRmsNorm(MLIRContext *ctx, Tactics tactics) : OpRewritePattern(ctx), tactics(tactics) {}
  LogicalResult matchAndRewrite(tx::AddRmsNormOp op, PatternRewriter &rewriter) const override {
    for (auto [a, b] : {std::pair{op.getLhs(), op.getRhs()}, std::pair{op.getRhs(), op.getLhs()}})
      if (Value sum = foldResidualIntoGemm(rewriter, op, a, b, op.getSum().getType(), tactics)) {
        Value normed = txk::RmsNormOp::create(rewriter, op.getLoc(), op.getNormed().getType(), sum,
                                              op.getWeight(), op.getEpsAttr());
        rewriter.replaceOp(op, {sum, normed});
        return success();
      }
    rewriter.replaceOpWithNewOp<txk::AddRmsNormOp>(op, op->getResultTypes(), op.getLhs(),
                                                   op.getRhs(), op.getWeight(), op.getEpsAttr());
    return success();
  }
  Tactics tactics;
};

/// swiglu(split(linear(x))) over the two halves -> gemm with a swiglu epilogue.
struct SwigluOfFusedLinear : OpRewritePattern<tx::SwigluOp> {
  SwigluOfFusedLinear(MLIRContext *ctx, Tactics tactics) : OpRewritePattern(ctx), tactics(tactics) {}
  LogicalResult matchAndRewrite(tx::SwigluOp op, PatternRewriter &rewriter) const override {
    auto split = op.getGate().getDefiningOp<tx::SplitOp>();
    if (!split || split.getNumResults() != 2 || split.getResult(0) != op.getGate() ||
        split.getResult(1) != op.getUp() || !split.getResult(0).hasOneUse() ||
        !split.getResult(1).hasOneUse())
      return rewriter.notifyMatchFailure(op, "gate and up are not the halves of one split");
    tx::LinearOp linear = soleLinearProducer(split.getInput(), split);
    if (!linear)
      return rewriter.notifyMatchFailure(op, "the split does not read a single-use linear");
    rewriter.replaceOp(op, createGemm(rewriter, op.getLoc(), op.getType(), linear, Value(),
                                      txk::GemmEpilogue::Swiglu, tactics));
    rewriter.eraseOp(split);
    rewriter.eraseOp(linear);
    return success();
  }
  Tactics tactics;
};

/// rope_append(split(linear(x))) -> gemm_rope_append(x), one launch; or
/// rope_append(split(qkv)) -> txk.rope_append(qkv) when the projection has
/// other users.
struct RopeAppendOfPackedQkv : OpRewritePattern<tx::RopeAppendOp> {
  RopeAppendOfPackedQkv(MLIRContext *ctx, Tactics tactics)
      : OpRewritePattern(ctx), tactics(tactics) {}
  LogicalResult matchAndRewrite(tx::RopeAppendOp op, PatternRewriter &rewriter) const override {
    auto split = op.getQuery().getDefiningOp<tx::SplitOp>();
    if (!split || split.getNumResults() != 3 || split.getResult(0) != op.getQuery() ||
        split.getResult(1) != op.getKey() || split.getResult(2) != op.getValue() ||
        split.getDim() != 1)
      return rewriter.notifyMatchFailure(op, "q, k, v are not one packed projection");
    tx::LinearOp linear = soleLinearProducer(split.getInput(), split);
    bool splitOnlyHere = llvm::all_of(split.getResults(), [&](Value r) {
      return llvm::all_of(r.getUsers(), [&](Operation *u) { return u == op; });
    });
    if (linear && splitOnlyHere) {
      auto fused = txk::GemmRopeAppendOp::create(
          rewriter, op.getLoc(), op.getType(), linear.getInput(), linear.getWeight(),
          linear.getBias(), op.getPositions(), op.getCache(), op.getBatch(), op.getQNorm(),
          op.getKNorm(), rewriter.getStringAttr(tactics.gemmAlgo(txk::GemmEpilogue::None)),
          op.getLayerAttr(), op.getNumHeadsAttr(), op.getNumKvHeadsAttr(), op.getHeadDimAttr(),
          op.getRopeAttr(), op.getNormEpsAttr());
      rewriter.replaceOp(op, fused);
      rewriter.eraseOp(split);
      rewriter.eraseOp(linear);
      return success();
    }
    auto append = txk::RopeAppendOp::create(
        rewriter, op.getLoc(), op.getType(), split.getInput(), op.getPositions(), op.getCache(),
        op.getBatch(), op.getQNorm(), op.getKNorm(), op.getLayerAttr(), op.getNumHeadsAttr(),
        op.getNumKvHeadsAttr(), op.getHeadDimAttr(), op.getRopeAttr(), op.getNormEpsAttr());
    rewriter.replaceOp(op, append);
    if (split->use_empty())
      rewriter.eraseOp(split);
    return success();
  }
  Tactics tactics;
};

struct LowerPagedAttention : OpRewritePattern<tx::PagedAttentionOp> {
  LowerPagedAttention(MLIRContext *ctx, Tactics tactics) : OpRewritePattern(ctx), tactics(tactics) {}
  LogicalResult matchAndRewrite(tx::PagedAttentionOp op, PatternRewriter &rewriter) const override {
    auto [tileQ, tileKv] = tactics.attentionTiles(op.getHeadDim());
    rewriter.replaceOpWithNewOp<txk::AttentionOp>(
        op, op.getType(), op.getQuery(), op.getCache(), op.getBatch(), op.getLayerAttr(),
        op.getNumHeadsAttr(), op.getNumKvHeadsAttr(), op.getHeadDimAttr(), op.getScaleAttr(),
        op.getCausalAttr(), op.getSlidingWindowAttr(), op.getLogitSoftcapAttr(),
        txk::AttentionFamilyAttr::get(getContext(), tactics.attentionFamily()),
        rewriter.getI64IntegerAttr(tileQ), rewriter.getI64IntegerAttr(tileKv),
        /*split_kv=*/rewriter.getI64IntegerAttr(0));
    return success();
  }
  Tactics tactics;
};

//===----------------------------------------------------------------------===//
// Phase 2: one to one
//===----------------------------------------------------------------------===//

struct LowerLinear : OpRewritePattern<tx::LinearOp> {
  LowerLinear(MLIRContext *ctx, Tactics tactics) : OpRewritePattern(ctx), tactics(tactics) {}
  LogicalResult matchAndRewrite(tx::LinearOp op, PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, createGemm(rewriter, op.getLoc(), op.getType(), op, Value(),
                                      txk::GemmEpilogue::None, tactics));
    return success();
  }
  Tactics tactics;
};

template <typename TxOp, typename TxkOp>
struct OneToOne : OpRewritePattern<TxOp> {
  using OpRewritePattern<TxOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(TxOp op, PatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<TxkOp>(op, op->getResultTypes(), op->getOperands(),
                                       op->getAttrs());
    return success();
  }
};

struct ConvertTxToTxkPass : txc::impl::ConvertTxToTxkPassBase<ConvertTxToTxkPass> {
  using ConvertTxToTxkPassBase::ConvertTxToTxkPassBase;

  void runOnOperation() override {
    if (target != "cpu" && target != "sm_90a") {
      getOperation().emitError() << "convert-tx-to-txk: unknown target '" << target
                                 << "' (supported: cpu, sm_90a)";
      return signalPassFailure();
    }
    Tactics tactics{target == "sm_90a"};
    MLIRContext *ctx = &getContext();

    RewritePatternSet fused(ctx);
    fused.add<AddOfLinear, LowerAddRmsNorm, SwigluOfFusedLinear, LowerPagedAttention,
              RopeAppendOfPackedQkv>(ctx, tactics);
    if (failed(applyPatternsGreedily(getOperation(), std::move(fused))))
      return signalPassFailure();

    RewritePatternSet single(ctx);
    single.add<LowerLinear>(ctx, tactics);
    single.add<OneToOne<tx::EmbeddingOp, txk::EmbeddingOp>, OneToOne<tx::RmsNormOp, txk::RmsNormOp>,
               OneToOne<tx::GatherLastOp, txk::GatherLastOp>,
               OneToOne<tx::AllReduceOp, txk::AllReduceOp>>(ctx);
    if (failed(applyPatternsGreedily(getOperation(), std::move(single))))
      return signalPassFailure();

    // Whatever tx compute is left has no kernel.
    WalkResult result = getOperation().walk([&](Operation *op) {
      if (op->getDialect() && op->getDialect()->getNamespace() == "tx" &&
          !isa<tx::WeightOp, tx::ConcatOp, tx::ScaleColumnsOp>(op)) {
        op->emitError() << "convert-tx-to-txk: no " << target << " kernel for '"
                        << op->getName() << "' in this form"
                        << (isa<tx::AttentionOp>(op) ? " (run tx-fuse-rotary first)" : "");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
