//===- TxkOps.h - txk operations --------------------------------*- C++ -*-===//

#ifndef TXC_DIALECTS_TXK_TXKOPS_H
#define TXC_DIALECTS_TXK_TXKOPS_H

#include "dialects/tx/TxTypes.h"
#include "dialects/txk/TxkDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/txk/TxkEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/txk/TxkAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/txk/TxkOps.h.inc"

#endif // TXC_DIALECTS_TXK_TXKOPS_H
