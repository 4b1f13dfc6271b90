//===- TxkPlanMemory.cpp - one arena for every activation --------------------===//
//
// Offsets are assigned largest buffer first, each at the lowest offset that
// does not overlap a buffer live at the same time (the greedy-by-size
// heuristic of TFLite's arena planner), which keeps a decoder's arena at a
// few activations no matter how many layers it has.
//
//===----------------------------------------------------------------------===//

#include "dialects/tx/TxOps.h"
#include "dialects/txk/TxkOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "txk-plan-memory"

namespace txc {
#define GEN_PASS_DEF_TXKPLANMEMORYPASS
#include "passes/Passes.h.inc"
} // namespace txc

using namespace mlir;
using namespace txc;

namespace {

constexpr int64_t kAlignment = 256;

struct Buffer {
  Value value;       // the result that owns the buffer
  int64_t bytes = 0;
  int64_t firstUse = 0, lastUse = 0; // op indices, inclusive
  int64_t offset = -1;
};

int64_t alignUp(int64_t x) { return (x + kAlignment - 1) / kAlignment * kAlignment; }

struct TxkPlanMemoryPass : txc::impl::TxkPlanMemoryPassBase<TxkPlanMemoryPass> {
  using TxkPlanMemoryPassBase::TxkPlanMemoryPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (maxBatchTokens <= 0 || maxSeqs <= 0 || maxSeqs > maxBatchTokens) {
      func.emitError() << "txk-plan-memory: need 0 < max-seqs (" << maxSeqs.getValue()
                       << ") <= max-batch-tokens (" << maxBatchTokens.getValue() << ")";
      return signalPassFailure();
    }
    if (!func.getBody().hasOneBlock()) {
      func.emitError("txk-plan-memory: expects a single-block step function");
      return signalPassFailure();
    }
    Block &body = func.getBody().front();

    // Rows each value can hold: the token bound, or the sequence bound from
    // gather_last on.
    DenseMap<Value, int64_t> rowBound;
    DenseMap<Operation *, int64_t> index;
    SmallVector<Buffer> buffers;
    DenseMap<Value, unsigned> bufferOf;
    int64_t position = 0;
    for (Operation &op : body) {
      index[&op] = position++;
      if (!isa<txk::TxkDialect>(op.getDialect()))
        continue;
      int64_t rows = isa<txk::GatherLastOp>(op) ? maxSeqs : maxBatchTokens;
      if (!isa<txk::GatherLastOp, txk::EmbeddingOp>(op) && op.getNumOperands() > 0 &&
          rowBound.count(op.getOperand(0)))
        rows = rowBound[op.getOperand(0)];
      for (Value result : op.getResults()) {
        rowBound[result] = rows;
        // An all_reduce sums in place: its result lives in its input's buffer.
        if (isa<txk::AllReduceOp>(op) && bufferOf.count(op.getOperand(0))) {
          bufferOf[result] = bufferOf[op.getOperand(0)];
          continue;
        }
        auto type = cast<RankedTensorType>(result.getType());
        int64_t elements = 1;
        for (int64_t d : type.getShape())
          elements *= ShapedType::isDynamic(d) ? rows : d;
        Buffer buffer;
        buffer.value = result;
        buffer.bytes = alignUp(elements * ((type.getElementTypeBitWidth() + 7) / 8));
        buffer.firstUse = buffer.lastUse = index[&op];
        bufferOf[result] = buffers.size();
        buffers.push_back(buffer);
      }
    }
    // Live ranges: to the last user; values the step returns live to the end.
    for (Operation &op : body)
      for (Value operand : op.getOperands())
        if (auto it = bufferOf.find(operand); it != bufferOf.end()) {
          int64_t end = isa<func::ReturnOp>(op) ? position : index[&op];
          buffers[it->second].lastUse = std::max(buffers[it->second].lastUse, end);
        }

    SmallVector<unsigned> order(buffers.size());
    std::iota(order.begin(), order.end(), 0);
    llvm::stable_sort(order, [&](unsigned a, unsigned b) { return buffers[a].bytes > buffers[b].bytes; });
    SmallVector<unsigned> placed;
    int64_t arenaSize = 0;
    for (unsigned i : order) {
      Buffer &buffer = buffers[i];
      SmallVector<std::pair<int64_t, int64_t>> busy;
      for (unsigned j : placed) {
        const Buffer &other = buffers[j];
        if (other.firstUse <= buffer.lastUse && buffer.firstUse <= other.lastUse)
          busy.push_back({other.offset, other.offset + other.bytes});
      }
      llvm::sort(busy);
      int64_t offset = 0;
      for (auto [begin, end] : busy) {
        if (offset + buffer.bytes <= begin)
          break;
        offset = std::max(offset, end);
      }
      buffer.offset = offset;
      arenaSize = std::max(arenaSize, offset + buffer.bytes);
      placed.push_back(i);
    }

    Builder builder(&getContext());
    for (Operation &op : body) {
      if (!isa<txk::TxkDialect>(op.getDialect()) || op.getNumResults() == 0)
        continue;
      SmallVector<int64_t> offsets, sizes;
      for (Value result : op.getResults()) {
        offsets.push_back(buffers[bufferOf[result]].offset);
        sizes.push_back(buffers[bufferOf[result]].bytes);
      }
      op.setAttr("arena_offsets", builder.getDenseI64ArrayAttr(offsets));
      op.setAttr("arena_bytes", builder.getDenseI64ArrayAttr(sizes));
    }
    func->setAttr("txk.arena_size", builder.getI64IntegerAttr(arenaSize));
    func->setAttr("txk.max_batch_tokens", builder.getI64IntegerAttr(maxBatchTokens));
    func->setAttr("txk.max_seqs", builder.getI64IntegerAttr(maxSeqs));
  }
};

} // namespace
