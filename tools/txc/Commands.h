//===- Commands.h - The subcommands of txc ----------------------*- C++ -*-===//
//
// Each subcommand lives in its own file: an llvm::cl::SubCommand with its
// options, and a run function that returns the exit code. txc.cpp
// dispatches to whichever was named.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_TOOLS_TXC_COMMANDS_H
#define TXC_TOOLS_TXC_COMMANDS_H

#include "llvm/Support/CommandLine.h"

namespace txc::tools {

/// `txc import MODEL_DIR [-o FILE]`: prints (or writes) the tx module.
extern llvm::cl::SubCommand importCommand;
int runImport();

/// `txc compile MODEL -o model.txm`: the pipeline, then the artifact.
extern llvm::cl::SubCommand compileCommand;
int runCompile();

/// `txc inspect model.txm`: what an artifact holds.
extern llvm::cl::SubCommand inspectCommand;
int runInspect();

} // namespace txc::tools

#endif // TXC_TOOLS_TXC_COMMANDS_H
