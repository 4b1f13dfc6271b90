//===- TxOps.h - tx operations ----------------------------------*- C++ -*-===//

#ifndef TXC_DIALECTS_TX_TXOPS_H
#define TXC_DIALECTS_TX_TXOPS_H

#include "dialects/tx/TxDialect.h"
#include "dialects/tx/TxTypes.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/tx/TxOps.h.inc"

#endif // TXC_DIALECTS_TX_TXOPS_H
