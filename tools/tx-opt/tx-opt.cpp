//===- tx-opt.cpp - the txc lit driver ---------------------------------------===//
//
// mlir-opt with every txc dialect and pass registered: what the lit suite
// runs, and the quickest way to try one pass on one file.
//
//===----------------------------------------------------------------------===//

#include "txc/InitAllTxc.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  txc::registerAllTxcDialects(registry);
  txc::registerAllTxcPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "txc optimizer driver\n", registry));
}
