//===- TxTypes.cpp - tx types and attributes --------------------------------===//

#include "dialects/tx/TxTypes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace txc::tx;

#include "dialects/tx/TxEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/tx/TxAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/tx/TxTypes.cpp.inc"

LogicalResult KvCacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t layers, int64_t kvHeads, int64_t headDim,
                                  int64_t pageSize, Type elementType) {
  if (layers <= 0 || kvHeads <= 0 || headDim <= 0 || pageSize <= 0)
    return emitError() << "kv_cache layers (" << layers << "), kv_heads (" << kvHeads
                       << "), head_dim (" << headDim << ") and page (" << pageSize
                       << ") must be positive";
  if (!elementType.isBF16() && !elementType.isF16() && !elementType.isF32())
    return emitError() << "kv_cache element type must be bf16, f16 or f32, got "
                       << elementType;
  return success();
}

void TxDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/tx/TxTypes.cpp.inc"
      >();
}

void TxDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/tx/TxAttrs.cpp.inc"
      >();
}

LogicalResult RopeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               APFloat thetaF, RopeScaling scaling,
                               APFloat factorF, APFloat lowFreqFactorF,
                               APFloat highFreqFactorF, int64_t originalMaxPosition,
                               APFloat betaFastF, APFloat betaSlowF,
                               APFloat attentionFactorF, int64_t rotaryDim) {
  double theta = thetaF.convertToDouble(), factor = factorF.convertToDouble();
  double lowFreqFactor = lowFreqFactorF.convertToDouble();
  double highFreqFactor = highFreqFactorF.convertToDouble();
  double betaFast = betaFastF.convertToDouble(), betaSlow = betaSlowF.convertToDouble();
  double attentionFactor = attentionFactorF.convertToDouble();
  if (!(theta > 0.0))
    return emitError() << "rope theta must be positive, got " << theta;
  if (rotaryDim < 0 || rotaryDim % 2 != 0)
    return emitError() << "rope rotary_dim must be even and non-negative, got " << rotaryDim;
  if (scaling == RopeScaling::Default)
    return success();
  if (!(factor > 0.0))
    return emitError() << "rope " << stringifyRopeScaling(scaling)
                       << " scaling needs a positive factor, got " << factor;
  bool needsOriginal = scaling == RopeScaling::Llama3 || scaling == RopeScaling::Yarn ||
                       scaling == RopeScaling::Dynamic;
  if (needsOriginal && originalMaxPosition <= 0)
    return emitError() << "rope " << stringifyRopeScaling(scaling)
                       << " scaling needs original_max_position > 0";
  if (scaling == RopeScaling::Llama3 && !(highFreqFactor > lowFreqFactor))
    return emitError() << "rope llama3 scaling needs high_freq_factor (" << highFreqFactor
                       << ") > low_freq_factor (" << lowFreqFactor << ")";
  if (scaling == RopeScaling::Yarn && !(betaFast > betaSlow))
    return emitError() << "rope yarn scaling needs beta_fast (" << betaFast
                       << ") > beta_slow (" << betaSlow << ")";
  if (attentionFactor < 0.0)
    return emitError() << "rope attention_factor must be non-negative, got "
                       << attentionFactor;
  return success();
}
