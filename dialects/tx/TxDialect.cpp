//===- TxDialect.cpp - the tx dialect ---------------------------------------===//

#include "dialects/tx/TxDialect.h"
#include "dialects/tx/TxOps.h"
#include "dialects/tx/TxTypes.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace txc::tx;

#include "dialects/tx/TxDialect.cpp.inc"

void TxDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/tx/TxOps.cpp.inc"
      >();
  registerTypes();
  registerAttributes();
}
