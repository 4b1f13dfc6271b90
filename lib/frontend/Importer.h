//===- Importer.h - A Hugging Face model directory as a tx module -*- C++ -*-===//
//
// Builds one `func.func @step` over a flat, ragged batch of tokens (prefill,
// decode and chunked prefill are the same graph):
//
//   func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>,
//                   %batch: !tx.batch, %cache: !tx.kv_cache<...>)
//       -> tensor<?xVOCABxf32>      // logits of each sequence's last token
//
// Weights are `tx.weight "<checkpoint name>"` with the checkpoint's exact
// shape and dtype; nothing is read but the headers. Activations and the KV
// cache take the embedding's dtype; logits are f32.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_LIB_FRONTEND_IMPORTER_H
#define TXC_LIB_FRONTEND_IMPORTER_H

#include "lib/frontend/ModelConfig.h"
#include "runtime/safetensors/Checkpoint.h"
#include "txc/Status.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <optional>
#include <string>
#include <vector>

namespace txc::frontend {

struct ImportOptions {
  /// Tokens per KV-cache page, recorded in the !tx.kv_cache type.
  int64_t kvPageSize = 16;
  /// The dtype weights, activations and the KV cache compute in; unset
  /// means the checkpoint's (the embedding's). The artifact writer converts
  /// weights stored in another dtype, so a bf16 checkpoint can run in f32.
  std::optional<DType> computeDType;
};

/// Reads MODEL_DIR/config.json and the checkpoint beside it, checks one
/// against the other, and builds the module. On failure returns the first
/// problem; `allProblems`, when given, receives every one (a checkpoint can
/// be wrong in many places at once).
StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> importModel(mlir::MLIRContext &context,
                                                        const std::string &modelDirectory,
                                                        const ImportOptions &options = {},
                                                        std::vector<Status> *allProblems = nullptr);

/// Builds the module from a config and a checkpoint that fit each other.
StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> buildStepModule(mlir::MLIRContext &context,
                                                            const ModelConfig &config,
                                                            const Checkpoint &checkpoint,
                                                            const ImportOptions &options = {});

} // namespace txc::frontend

#endif // TXC_LIB_FRONTEND_IMPORTER_H
