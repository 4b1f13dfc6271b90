//===- TxkOps.cpp - the txk dialect, its ops and verifiers ------------------===//
//
// txk is produced by the compiler, not written by hand, so its verifiers
// check what a wrong lowering would break: operand widths against head
// counts, and the operands each GEMM epilogue needs.
//
//===----------------------------------------------------------------------===//

#include "dialects/txk/TxkOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace txc::txk;

#include "dialects/txk/TxkDialect.cpp.inc"
#include "dialects/txk/TxkEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/txk/TxkAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/txk/TxkOps.cpp.inc"

void TxkDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/txk/TxkOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/txk/TxkAttrs.cpp.inc"
      >();
}

static int64_t dim(Value v, unsigned i) { return cast<RankedTensorType>(v.getType()).getDimSize(i); }

static bool compatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

LogicalResult GemmOp::verify() {
  int64_t k = dim(getInput(), 1), n = dim(getWeight(), 0);
  if (!compatible(k, dim(getWeight(), 1)))
    return emitOpError() << "input dim 1 (" << k << ") does not match weight dim 1 ("
                         << dim(getWeight(), 1) << ")";
  if (getBias() && !compatible(dim(getBias(), 0), n))
    return emitOpError() << "bias size " << dim(getBias(), 0) << " does not match weight rows "
                         << n;
  int64_t expected = getEpilogue() == GemmEpilogue::Swiglu ? n / 2 : n;
  if (getEpilogue() == GemmEpilogue::Swiglu && n % 2 != 0)
    return emitOpError() << "swiglu epilogue needs an even number of weight rows, got " << n;
  if (!compatible(dim(getResult(), 1), expected))
    return emitOpError() << "result dim 1 (" << dim(getResult(), 1) << ") must be " << expected;
  bool wantsResidual = getEpilogue() == GemmEpilogue::ResidualAdd;
  if (wantsResidual != bool(getResidual()))
    return emitOpError() << "a residual operand is needed exactly when the epilogue is "
                            "residual_add";
  if (getResidual() && getResidual().getType() != getResult().getType())
    return emitOpError("residual type must equal the result type");
  return success();
}

/// Shared by rope_append and gemm_rope_append: `qkvWidth` packs Q, K, V.
template <typename OpTy>
static LogicalResult verifyRopeAppend(OpTy op, int64_t qkvWidth) {
  int64_t heads = op.getNumHeads(), kvHeads = op.getNumKvHeads(), headDim = op.getHeadDim();
  if (!compatible(qkvWidth, (heads + 2 * kvHeads) * headDim))
    return op.emitOpError() << "qkv width (" << qkvWidth << ") must be (" << heads << " + 2 x "
                            << kvHeads << ") heads x head_dim " << headDim;
  if (!compatible(dim(op.getResult(), 1), heads * headDim))
    return op.emitOpError() << "result dim 1 must be num_heads x head_dim = " << heads * headDim;
  if (bool(op.getQNorm()) != bool(op.getKNorm()))
    return op.emitOpError("q_norm and k_norm come together");
  if (op.getQNorm() && (dim(op.getQNorm(), 0) != headDim || dim(op.getKNorm(), 0) != headDim))
    return op.emitOpError() << "q_norm and k_norm must have head_dim (" << headDim
                            << ") elements";
  if (op.getQNorm() && !op.getNormEps())
    return op.emitOpError("q/k norms need norm_eps");
  txc::tx::KvCacheType cache = op.getCache().getType();
  if (cache.getKvHeads() != kvHeads || cache.getHeadDim() != headDim)
    return op.emitOpError("cache kv_heads/head_dim do not match the op's");
  return success();
}

LogicalResult RopeAppendOp::verify() { return verifyRopeAppend(*this, dim(getQkv(), 1)); }

LogicalResult GemmRopeAppendOp::verify() {
  if (!compatible(dim(getInput(), 1), dim(getWeight(), 1)))
    return emitOpError() << "input dim 1 (" << dim(getInput(), 1)
                         << ") does not match weight dim 1 (" << dim(getWeight(), 1) << ")";
  return verifyRopeAppend(*this, dim(getWeight(), 0));
}
