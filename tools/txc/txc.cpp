//===- txc.cpp - the txc command-line driver -----------------------------===//
//
// `txc <command> ...`: one binary for the compiler's user-facing steps.
// Each command is a file of its own (Commands.h).
//
//===----------------------------------------------------------------------===//

#include "tools/txc/Commands.h"

#include "txc/artifact/ArtifactWriter.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // Every txc option belongs to a subcommand; the top level holds only what
  // libLLVM registers for its own tools, which `txc --help` should not list.
  for (auto &[name, option] : llvm::cl::getRegisteredOptions(llvm::cl::SubCommand::getTopLevel()))
    if (name != "help" && name != "version")
      option->setHiddenFlag(llvm::cl::ReallyHidden);
  // --version is listed by --help; without this it prints libLLVM's version,
  // not the txc that writes (and stamps) the artifacts.
  llvm::cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << "txc " << txc::artifact::txcVersionString() << "\n"; });
  llvm::cl::ParseCommandLineOptions(
      argc, argv, "txc: compile Hugging Face transformer models for the txc runtime\n");
  if (txc::tools::importCommand)
    return txc::tools::runImport();
  if (txc::tools::compileCommand)
    return txc::tools::runCompile();
  if (txc::tools::inspectCommand)
    return txc::tools::runInspect();
  llvm::errs() << "txc: name a command (txc --help lists them)\n";
  return 1;
}
