//===- TxTypes.h - tx types and attributes ----------------------*- C++ -*-===//

#ifndef TXC_DIALECTS_TX_TXTYPES_H
#define TXC_DIALECTS_TX_TXTYPES_H

#include "dialects/tx/TxDialect.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialects/tx/TxEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/tx/TxAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/tx/TxTypes.h.inc"

#endif // TXC_DIALECTS_TX_TXTYPES_H
