//===- TxkDialect.h - the txk dialect ---------------------------*- C++ -*-===//

#ifndef TXC_DIALECTS_TXK_TXKDIALECT_H
#define TXC_DIALECTS_TXK_TXKDIALECT_H

#include "dialects/tx/TxDialect.h"
#include "mlir/IR/Dialect.h"

#include "dialects/txk/TxkDialect.h.inc"

#endif // TXC_DIALECTS_TXK_TXKDIALECT_H
