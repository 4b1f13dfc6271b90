//===- TxShard.cpp - Megatron tensor parallelism ------------------------------===//
//
// Rewrites the step into what one of `tp` ranks runs. The rewrite follows
// the dataflow of each attention block and each MLP from the op that
// defines it (tx.attention, the SwiGLU product) back to its projections,
// so it needs the unfused form: the pipeline runs it before tx-fuse-*.
//
//===----------------------------------------------------------------------===//

#include "dialects/tx/TxOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "tx-shard"

namespace txc {
#define GEN_PASS_DEF_TXSHARDPASS
#include "passes/Passes.h.inc"
} // namespace txc

using namespace mlir;
using namespace txc;

namespace {

RankedTensorType withDim(Type type, unsigned dim, int64_t size) {
  auto tensor = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(tensor.getShape());
  shape[dim] = size;
  return tensor.clone(shape);
}

class Sharder {
public:
  Sharder(int64_t tp) : tp(tp) {}

  /// Marks the weight (or bias) `v` as `parts` slices along `dim`.
  LogicalResult shardWeight(Operation *user, Value v, int64_t dim, int64_t parts) {
    auto weight = v.getDefiningOp<tx::WeightOp>();
    if (!weight)
      return user->emitError("tx-shard: expects projection weights to be tx.weight");
    if (weight.getShardDim())
      return success(); // a weight shared by two projections is cut once
    int64_t size = weight.getType().getDimSize(dim);
    if (size % parts != 0)
      return user->emitError() << "tx-shard: weight '" << weight.getName() << "' dim " << dim
                               << " (" << size << ") is not divisible into " << parts << " parts";
    Builder b(weight.getContext());
    weight.setShardDimAttr(b.getI64IntegerAttr(dim));
    weight.setShardPartsAttr(b.getI64IntegerAttr(parts));
    weight.getResult().setType(withDim(weight.getType(), dim, size / parts));
    return success();
  }

  /// Column-parallel: `linear` keeps 1/parts of its output features. The
  /// per-head norm and rotary ops between it and `consumer` narrow with it.
  LogicalResult shardColumns(Value produced, int64_t parts) {
    SmallVector<Operation *> chain;
    Value v = produced;
    while (isa_and_nonnull<tx::RotaryOp, tx::RmsNormOp, tx::SiluOp>(v.getDefiningOp())) {
      chain.push_back(v.getDefiningOp());
      v = v.getDefiningOp()->getOperand(0);
    }
    auto linear = v.getDefiningOp<tx::LinearOp>();
    if (!linear)
      return produced.getDefiningOp() ? produced.getDefiningOp()->emitError(
                                            "tx-shard: cannot find the projection of this value")
                                      : failure();
    if (failed(shardWeight(linear, linear.getWeight(), 0, parts)) ||
        (linear.getBias() && failed(shardWeight(linear, linear.getBias(), 0, parts))))
      return failure();
    int64_t width = linear.getType().getDimSize(1) / parts;
    linear.getResult().setType(withDim(linear.getType(), 1, width));
    for (Operation *op : llvm::reverse(chain))
      op->getResult(0).setType(withDim(op->getResult(0).getType(), 1, width));
    return success();
  }

  /// Row-parallel: the projection reading `input` keeps 1/tp of its input
  /// features, and its partial sums are all-reduced.
  LogicalResult shardRowsAndReduce(Operation *producer, Value input) {
    if (!input.hasOneUse())
      return producer->emitError("tx-shard: expects one projection to read this value");
    auto linear = dyn_cast<tx::LinearOp>(*input.getUsers().begin());
    if (!linear)
      return producer->emitError("tx-shard: expects a projection to read this value");
    if (linear.getBias())
      return linear.emitError("tx-shard: a row-parallel projection with a bias would add it "
                              "once per rank");
    if (failed(shardWeight(linear, linear.getWeight(), 1, tp)))
      return failure();
    OpBuilder builder(linear->getContext());
    builder.setInsertionPointAfter(linear);
    auto reduce = tx::AllReduceOp::create(builder, linear.getLoc(), linear.getType(),
                                          linear.getResult(), tp);
    linear.getResult().replaceAllUsesExcept(reduce.getResult(), reduce);
    return success();
  }

  LogicalResult shardAttention(tx::AttentionOp attention, int64_t &kvLocalOut) {
    int64_t heads = attention.getNumHeads(), kvHeads = attention.getNumKvHeads();
    int64_t headDim = attention.getHeadDim();
    if (heads % tp != 0)
      return attention.emitError() << "tx-shard: num_heads (" << heads << ") of layer "
                                   << attention.getLayer() << " is not divisible by tp=" << tp;
    // Fewer KV heads than ranks: each rank keeps the one KV head its query
    // heads read, replicated across the ranks that share it.
    int64_t kvParts, kvLocal;
    if (kvHeads % tp == 0) {
      kvParts = tp;
      kvLocal = kvHeads / tp;
    } else if (tp % kvHeads == 0) {
      kvParts = kvHeads;
      kvLocal = 1;
    } else {
      return attention.emitError() << "tx-shard: num_kv_heads (" << kvHeads << ") of layer "
                                   << attention.getLayer() << " neither divides nor is divisible "
                                   << "by tp=" << tp;
    }
    if (failed(shardColumns(attention.getQuery(), tp)) ||
        failed(shardColumns(attention.getKey(), kvParts)) ||
        failed(shardColumns(attention.getValue(), kvParts)))
      return failure();
    Builder b(attention.getContext());
    attention.setNumHeadsAttr(b.getI64IntegerAttr(heads / tp));
    attention.setNumKvHeadsAttr(b.getI64IntegerAttr(kvLocal));
    attention.getResult().setType(withDim(attention.getType(), 1, heads / tp * headDim));
    kvLocalOut = kvLocal;
    return shardRowsAndReduce(attention, attention.getResult());
  }

  /// silu(gate) * up, or swiglu(gate, up), then down.
  LogicalResult shardMlp(Operation *product, Value gate, Value up) {
    if (failed(shardColumns(gate, tp)) || failed(shardColumns(up, tp)))
      return failure();
    product->getResult(0).setType(up.getType());
    return shardRowsAndReduce(product, product->getResult(0));
  }

private:
  int64_t tp;
};

struct TxShardPass : txc::impl::TxShardPassBase<TxShardPass> {
  using TxShardPassBase::TxShardPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tp < 1) {
      module.emitError() << "tx-shard: tp must be at least 1, got " << tp.getValue();
      return signalPassFailure();
    }
    module->setAttr("tx.tp", Builder(module).getI64IntegerAttr(tp));
    if (tp == 1)
      return;
    Sharder sharder(tp);
    for (auto func : module.getOps<func::FuncOp>()) {
      std::optional<int64_t> kvLocal;
      SmallVector<tx::AttentionOp> attentions(func.getOps<tx::AttentionOp>());
      for (tx::AttentionOp attention : attentions) {
        int64_t local = 0;
        if (failed(sharder.shardAttention(attention, local)))
          return signalPassFailure();
        kvLocal = local;
      }
      SmallVector<Operation *> products;
      func.walk([&](Operation *op) {
        if (isa<tx::SwigluOp>(op))
          products.push_back(op);
        else if (auto mul = dyn_cast<tx::MulOp>(op))
          if (mul.getLhs().getDefiningOp<tx::SiluOp>() || mul.getRhs().getDefiningOp<tx::SiluOp>())
            products.push_back(op);
      });
      for (Operation *product : products) {
        Value gate = product->getOperand(0), up = product->getOperand(1);
        if (isa<tx::MulOp>(product) && !gate.getDefiningOp<tx::SiluOp>())
          std::swap(gate, up);
        if (failed(sharder.shardMlp(product, gate, up)))
          return signalPassFailure();
      }
      // The cache now holds this rank's KV heads only.
      if (kvLocal) {
        SmallVector<Type> inputs(func.getArgumentTypes());
        for (auto [i, arg] : llvm::enumerate(func.getArguments()))
          if (auto cache = dyn_cast<tx::KvCacheType>(arg.getType())) {
            auto local = tx::KvCacheType::get(&getContext(), cache.getLayers(), *kvLocal,
                                              cache.getHeadDim(), cache.getPageSize(),
                                              cache.getElementType());
            arg.setType(local);
            inputs[i] = local;
          }
        func.setFunctionType(FunctionType::get(&getContext(), inputs, func.getResultTypes()));
      }
    }
  }
};

} // namespace
