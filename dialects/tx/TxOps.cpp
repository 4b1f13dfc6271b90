//===- TxOps.cpp - tx operation verifiers and folders -----------------------===//
//
// Every shape rule of the dialect lives here. A dynamic dimension (the token
// axis) is compatible with anything; static dimensions must agree exactly.
// Diagnostics name the operands they compare, so a frontend bug points at
// the tensor that is wrong.
//
//===----------------------------------------------------------------------===//

#include "dialects/tx/TxOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <string>

using namespace mlir;
using namespace txc::tx;

namespace {

bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

std::string dimString(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Checks that `a` and `b` have the same element type, naming both.
LogicalResult verifySameElementType(Operation *op, Value a, StringRef aName, Value b,
                                    StringRef bName) {
  Type ea = tensorType(a).getElementType(), eb = tensorType(b).getElementType();
  if (ea != eb)
    return op->emitOpError() << aName << " element type " << ea << " does not match " << bName
                             << " element type " << eb;
  return success();
}

/// Checks that dimension `da` of `a` equals dimension `db` of `b`.
LogicalResult verifyDimsMatch(Operation *op, Value a, StringRef aName, unsigned da, Value b,
                              StringRef bName, unsigned db) {
  int64_t x = tensorType(a).getDimSize(da), y = tensorType(b).getDimSize(db);
  if (!dimsCompatible(x, y))
    return op->emitOpError() << aName << " dim " << da << " (" << dimString(x) << ") does not match "
                             << bName << " dim " << db << " (" << dimString(y) << ")";
  return success();
}

} // namespace

#define GET_OP_CLASSES
#include "dialects/tx/TxOps.cpp.inc"

//===----------------------------------------------------------------------===//
// WeightOp
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError("weight name must not be empty");
  if (!getType().hasStaticShape())
    return emitOpError() << "weight '" << getName() << "' must have a static shape, got "
                         << getType();
  if (bool(getShardDim()) != bool(getShardParts()))
    return emitOpError() << "weight '" << getName() << "' needs shard_dim and shard_parts together";
  if (getShardDim() && (*getShardDim() < 0 || *getShardDim() >= getType().getRank() ||
                        *getShardParts() < 1))
    return emitOpError() << "weight '" << getName() << "' has shard_dim " << *getShardDim()
                         << " and shard_parts " << *getShardParts()
                         << "; need 0 <= shard_dim < rank and shard_parts >= 1";
  return success();
}

//===----------------------------------------------------------------------===//
// ConcatOp and SplitOp
//===----------------------------------------------------------------------===//

/// Shared rule of concat and split: `pieces` laid end to end along `dim`
/// make up `whole`.
static LogicalResult verifyPieces(Operation *op, Value whole, StringRef wholeName,
                                  ValueRange pieces, StringRef pieceName, int64_t dim) {
  RankedTensorType wholeType = tensorType(whole);
  if (pieces.empty())
    return op->emitOpError() << "needs at least one " << pieceName;
  if (dim < 0 || dim >= wholeType.getRank())
    return op->emitOpError() << "dim " << dim << " is out of range for " << wholeName
                             << " of rank " << wholeType.getRank();
  int64_t sum = 0;
  bool sumKnown = true;
  for (auto [i, piece] : llvm::enumerate(pieces)) {
    RankedTensorType pieceType = tensorType(piece);
    std::string name = (pieceName + " #" + Twine(i)).str();
    if (pieceType.getRank() != wholeType.getRank())
      return op->emitOpError() << name << " has rank " << pieceType.getRank() << " but "
                               << wholeName << " has rank " << wholeType.getRank();
    if (failed(verifySameElementType(op, piece, name, whole, wholeName)))
      return failure();
    for (int64_t d = 0; d < wholeType.getRank(); ++d) {
      if (d == dim)
        continue;
      if (failed(verifyDimsMatch(op, piece, name, d, whole, wholeName, d)))
        return failure();
    }
    if (pieceType.isDynamicDim(dim))
      sumKnown = false;
    else
      sum += pieceType.getDimSize(dim);
  }
  if (sumKnown && !wholeType.isDynamicDim(dim) && sum != wholeType.getDimSize(dim))
    return op->emitOpError() << pieceName << " sizes along dim " << dim << " add up to " << sum
                             << " but " << wholeName << " has " << wholeType.getDimSize(dim);
  return success();
}

LogicalResult ConcatOp::verify() {
  return verifyPieces(*this, getResult(), "result", getInputs(), "input", getDim());
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  // concat(x) is x.
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  // concat(split(x)) over all of split's results, in order, is x.
  auto split = getInputs()[0].getDefiningOp<SplitOp>();
  if (!split || split.getDim() != getDim() || split.getInput().getType() != getType() ||
      split.getNumResults() != getInputs().size())
    return {};
  for (auto [result, input] : llvm::zip(split.getResults(), getInputs()))
    if (result != input)
      return {};
  return split.getInput();
}

LogicalResult SplitOp::verify() {
  return verifyPieces(*this, getInput(), "input", getResults(), "result", getDim());
}

LogicalResult SplitOp::fold(FoldAdaptor, SmallVectorImpl<OpFoldResult> &results) {
  // split(x) into one piece is x.
  if (getNumResults() == 1 && getResult(0).getType() == getInput().getType()) {
    results.push_back(getInput());
    return success();
  }
  // split(concat(a, b, ...)) into the same pieces is a, b, ...
  auto concat = getInput().getDefiningOp<ConcatOp>();
  if (!concat || concat.getDim() != getDim() || concat.getInputs().size() != getNumResults())
    return failure();
  for (auto [input, result] : llvm::zip(concat.getInputs(), getResults()))
    if (input.getType() != result.getType())
      return failure();
  for (Value input : concat.getInputs())
    results.push_back(input);
  return success();
}

//===----------------------------------------------------------------------===//
// EmbeddingOp, RmsNormOp, LinearOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  if (failed(verifyDimsMatch(*this, getResult(), "result", 0, getTokens(), "tokens", 0)) ||
      failed(verifyDimsMatch(*this, getResult(), "result", 1, getTable(), "table", 1)))
    return failure();
  return verifySameElementType(*this, getResult(), "result", getTable(), "table");
}

LogicalResult RmsNormOp::verify() {
  if (!(getEps().convertToDouble() > 0.0))
    return emitOpError() << "eps must be positive, got " << getEps().convertToDouble();
  if (!getWeight())
    return success(); // one group a row
  int64_t group = tensorType(getWeight()).getDimSize(0);
  int64_t features = getInput().getType().getDimSize(1);
  if (ShapedType::isDynamic(group) || group == 0)
    return emitOpError("weight must have a static, non-zero size");
  if (!ShapedType::isDynamic(features) && features % group != 0)
    return emitOpError() << "input dim 1 (" << features << ") is not a multiple of weight dim 0 ("
                         << group << ")";
  return success();
}

LogicalResult ScaleColumnsOp::verify() {
  if (failed(verifyDimsMatch(*this, getScale(), "scale", 0, getInput(), "input", 1)) ||
      failed(verifySameElementType(*this, getScale(), "scale", getInput(), "input")))
    return failure();
  return success();
}

LogicalResult LinearOp::verify() {
  // input [N, K] x weight [M, K] -> result [N, M]
  if (failed(verifyDimsMatch(*this, getInput(), "input", 1, getWeight(), "weight", 1)) ||
      failed(verifyDimsMatch(*this, getResult(), "result", 0, getInput(), "input", 0)) ||
      failed(verifyDimsMatch(*this, getResult(), "result", 1, getWeight(), "weight", 0)) ||
      failed(verifySameElementType(*this, getInput(), "input", getWeight(), "weight")))
    return failure();
  if (Value bias = getBias()) {
    if (failed(verifyDimsMatch(*this, bias, "bias", 0, getWeight(), "weight", 0)) ||
        failed(verifySameElementType(*this, bias, "bias", getWeight(), "weight")))
      return failure();
  }
  Type resultElement = getResult().getType().getElementType();
  if (resultElement != getInput().getType().getElementType() && !resultElement.isF32())
    return emitOpError() << "result element type must be the input's ("
                         << getInput().getType().getElementType() << ") or f32, got "
                         << resultElement;
  return success();
}

//===----------------------------------------------------------------------===//
// RotaryOp and AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult RotaryOp::verify() {
  int64_t headDim = getHeadDim();
  if (headDim <= 0 || headDim % 2 != 0)
    return emitOpError() << "head_dim must be positive and even, got " << headDim;
  int64_t features = getInput().getType().getDimSize(1);
  if (!ShapedType::isDynamic(features) && features % headDim != 0)
    return emitOpError() << "input dim 1 (" << features << ") is not a multiple of head_dim ("
                         << headDim << ")";
  if (getRope().getRotaryDim() > headDim)
    return emitOpError() << "rope rotary_dim (" << getRope().getRotaryDim()
                         << ") exceeds head_dim (" << headDim << ")";
  return verifyDimsMatch(*this, getPositions(), "positions", 0, getInput(), "input", 0);
}

/// The rules every attention-shaped op shares: head counts, the query's
/// width, the cache it reads and the masking attributes.
static LogicalResult verifyAttentionCommon(Operation *op, Value query, KvCacheType cache,
                                           int64_t layer, int64_t heads, int64_t kvHeads,
                                           int64_t headDim) {
  if (heads <= 0 || kvHeads <= 0 || headDim <= 0)
    return op->emitOpError() << "num_heads (" << heads << "), num_kv_heads (" << kvHeads
                             << ") and head_dim (" << headDim << ") must be positive";
  if (heads % kvHeads != 0)
    return op->emitOpError() << "num_heads (" << heads << ") is not a multiple of num_kv_heads ("
                             << kvHeads << ")";
  if (cache.getKvHeads() != kvHeads)
    return op->emitOpError() << "cache kv_heads (" << cache.getKvHeads()
                             << ") does not match num_kv_heads (" << kvHeads << ")";
  if (cache.getHeadDim() != headDim)
    return op->emitOpError() << "cache head_dim (" << cache.getHeadDim()
                             << ") does not match head_dim (" << headDim << ")";
  if (layer < 0 || layer >= cache.getLayers())
    return op->emitOpError() << "layer " << layer << " is out of range for a cache of "
                             << cache.getLayers() << " layers";
  Type element = tensorType(query).getElementType();
  if (cache.getElementType() != element)
    return op->emitOpError() << "cache element type " << cache.getElementType()
                             << " does not match query element type " << element;
  return success();
}

/// `value` must be `[tokens, n * headDim]`.
static LogicalResult verifyHeadsWidth(Operation *op, Value value, StringRef name, int64_t n,
                                      int64_t headDim) {
  int64_t width = tensorType(value).getDimSize(1);
  if (!dimsCompatible(width, n * headDim))
    return op->emitOpError() << name << " dim 1 (" << dimString(width) << ") must be " << n
                             << " heads x head_dim " << headDim << " = " << n * headDim;
  return success();
}

static LogicalResult verifyMasking(Operation *op, double scale, std::optional<int64_t> window,
                                   std::optional<APFloat> softcap) {
  if (!(scale > 0.0))
    return op->emitOpError() << "scale must be positive, got " << scale;
  if (window && *window <= 0)
    return op->emitOpError() << "sliding_window must be positive, got " << *window;
  if (softcap && !(softcap->convertToDouble() > 0.0))
    return op->emitOpError() << "logit_softcap must be positive, got "
                             << softcap->convertToDouble();
  return success();
}

/// The attention ops' result (typed as the query) and their masking
/// attributes.
template <typename AttentionLikeOp> static LogicalResult verifyOutputAndMasking(AttentionLikeOp op) {
  if (op.getResult().getType() != op.getQuery().getType())
    return op.emitOpError() << "result type " << op.getResult().getType() << " must equal query type "
                            << op.getQuery().getType();
  return verifyMasking(op.getOperation(), op.getScale().convertToDouble(), op.getSlidingWindow(),
                       op.getLogitSoftcap());
}

/// Q, K and V of one step: widths, token counts and element types agree.
static LogicalResult verifyQkv(Operation *op, Value q, Value k, Value v, int64_t heads,
                               int64_t kvHeads, int64_t headDim) {
  if (failed(verifyHeadsWidth(op, q, "query", heads, headDim)) ||
      failed(verifyHeadsWidth(op, k, "key", kvHeads, headDim)) ||
      failed(verifyHeadsWidth(op, v, "value", kvHeads, headDim)) ||
      failed(verifyDimsMatch(op, k, "key", 0, q, "query", 0)) ||
      failed(verifyDimsMatch(op, v, "value", 0, q, "query", 0)) ||
      failed(verifySameElementType(op, k, "key", q, "query")) ||
      failed(verifySameElementType(op, v, "value", q, "query")))
    return failure();
  return success();
}

LogicalResult AttentionOp::verify() {
  int64_t heads = getNumHeads(), kvHeads = getNumKvHeads(), headDim = getHeadDim();
  if (failed(verifyAttentionCommon(*this, getQuery(), getCache().getType(), getLayer(), heads,
                                   kvHeads, headDim)) ||
      failed(verifyQkv(*this, getQuery(), getKey(), getValue(), heads, kvHeads, headDim)))
    return failure();
  return verifyOutputAndMasking(*this);
}

LogicalResult PagedAttentionOp::verify() {
  if (failed(verifyAttentionCommon(*this, getQuery(), getCache().getType(), getLayer(),
                                   getNumHeads(), getNumKvHeads(), getHeadDim())) ||
      failed(verifyHeadsWidth(*this, getQuery(), "query", getNumHeads(), getHeadDim())))
    return failure();
  return verifyOutputAndMasking(*this);
}

LogicalResult RopeAppendOp::verify() {
  int64_t heads = getNumHeads(), kvHeads = getNumKvHeads(), headDim = getHeadDim();
  if (failed(verifyAttentionCommon(*this, getQuery(), getCache().getType(), getLayer(), heads,
                                   kvHeads, headDim)) ||
      failed(verifyQkv(*this, getQuery(), getKey(), getValue(), heads, kvHeads, headDim)) ||
      failed(verifyDimsMatch(*this, getPositions(), "positions", 0, getQuery(), "query", 0)))
    return failure();
  if (getResult().getType() != getQuery().getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal query type " << getQuery().getType();
  if (bool(getQNorm()) != bool(getKNorm()))
    return emitOpError("q_norm and k_norm must be given together");
  if (getQNorm()) {
    for (auto [norm, name] : {std::pair{getQNorm(), "q_norm"}, std::pair{getKNorm(), "k_norm"}})
      if (tensorType(norm).getDimSize(0) != headDim)
        return emitOpError() << name << " has " << tensorType(norm).getDimSize(0)
                             << " elements, expected head_dim " << headDim;
    if (!getNormEps() || !(getNormEps()->convertToDouble() > 0.0))
      return emitOpError("q/k norms need a positive norm_eps");
  }
  if (getRope().getRotaryDim() > headDim)
    return emitOpError() << "rope rotary_dim (" << getRope().getRotaryDim()
                         << ") exceeds head_dim (" << headDim << ")";
  return success();
}

LogicalResult AddRmsNormOp::verify() {
  if (getLhs().getType() != getRhs().getType())
    return emitOpError() << "lhs type " << getLhs().getType() << " does not match rhs type "
                         << getRhs().getType();
  if (getSum().getType() != getLhs().getType() || getNormed().getType() != getLhs().getType())
    return emitOpError("sum and normed must have the operands' type");
  if (!(getEps().convertToDouble() > 0.0))
    return emitOpError() << "eps must be positive, got " << getEps().convertToDouble();
  if (!getWeight())
    return success(); // folded into the linears that read `normed`
  int64_t features = getLhs().getType().getDimSize(1);
  int64_t group = tensorType(getWeight()).getDimSize(0);
  if (ShapedType::isDynamic(group) || features != group)
    return emitOpError() << "weight size (" << dimString(group)
                         << ") must equal the hidden size (" << dimString(features) << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// GatherLastOp and AllReduceOp
//===----------------------------------------------------------------------===//

LogicalResult GatherLastOp::verify() {
  if (failed(verifyDimsMatch(*this, getResult(), "result", 1, getInput(), "input", 1)))
    return failure();
  return verifySameElementType(*this, getResult(), "result", getInput(), "input");
}

LogicalResult AllReduceOp::verify() {
  if (getGroupSize() < 1)
    return emitOpError() << "group_size must be at least 1, got " << getGroupSize();
  return success();
}

OpFoldResult AllReduceOp::fold(FoldAdaptor) {
  // A group of one rank sums nothing.
  if (getGroupSize() == 1)
    return getInput();
  return {};
}
