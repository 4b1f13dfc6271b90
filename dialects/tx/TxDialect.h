//===- TxDialect.h - the tx dialect -----------------------------*- C++ -*-===//

#ifndef TXC_DIALECTS_TX_TXDIALECT_H
#define TXC_DIALECTS_TX_TXDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/tx/TxDialect.h.inc"

#endif // TXC_DIALECTS_TX_TXDIALECT_H
