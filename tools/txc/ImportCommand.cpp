//===- ImportCommand.cpp - txc import MODEL_DIR [-o FILE] -----------------===//
//
// Reads a Hugging Face model directory (config.json and its safetensors,
// headers only) and prints the tx module, or writes it with -o. Every
// problem found is one line on stderr naming the file and the tensor; the
// exit code is then 1.
//
//===----------------------------------------------------------------------===//

#include "tools/txc/Commands.h"

#include "lib/frontend/Importer.h"
#include "txc/InitAllTxc.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace txc::tools {

llvm::cl::SubCommand importCommand("import", "Import a Hugging Face model directory as a tx "
                                             "module (config.json + safetensors)");

namespace {

llvm::cl::opt<std::string> modelDirectory(llvm::cl::Positional, llvm::cl::Required,
                                          llvm::cl::desc("<model directory>"),
                                          llvm::cl::sub(importCommand));
llvm::cl::opt<std::string> outputFile("o", llvm::cl::desc("Write the module to <file>"),
                                      llvm::cl::value_desc("file"), llvm::cl::init("-"),
                                      llvm::cl::sub(importCommand));
llvm::cl::opt<int64_t> pageSize("kv-page-size",
                                llvm::cl::desc("Tokens per KV-cache page (default 16)"),
                                llvm::cl::init(16), llvm::cl::sub(importCommand));

} // namespace

int runImport() {
  if (pageSize < 1) {
    llvm::errs() << "txc import: --kv-page-size must be positive, got " << pageSize << "\n";
    return 1;
  }
  mlir::DialectRegistry registry;
  registerAllTxcDialects(registry);
  mlir::MLIRContext context(registry);

  frontend::ImportOptions options;
  options.kvPageSize = pageSize;
  std::vector<Status> problems;
  auto module = frontend::importModel(context, modelDirectory, options, &problems);
  if (!module.isOk()) {
    for (const Status &problem : problems)
      llvm::errs() << "txc import: error: " << problem.message() << "\n";
    return 1;
  }

  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << "txc import: error: " << outputFile << ": " << error << "\n";
    return 1;
  }
  module.value()->print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}

} // namespace txc::tools
