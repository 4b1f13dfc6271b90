//===- Compiler.h - compile a tx module into an artifact -------*- C++ -*-===//
//
// The compiler's public entry points: run the txc pipeline on an imported
// module and write the result as one .txm artifact. tools/txc and the
// Python module call these; nothing here is tool-specific.
//
//===----------------------------------------------------------------------===//

#ifndef TXC_COMPILER_H
#define TXC_COMPILER_H

#include "txc/Status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace txc {
namespace artifact::pb {
class Artifact;
} // namespace artifact::pb

struct CompileOptions {
  /// "cpu" or "sm_90a".
  std::string target = "cpu";
  int64_t tensorParallel = 1;
  int64_t maxBatchTokens = 2048;
  int64_t maxSeqs = 256;
  /// `txc compile` caps its default at the model's max_position_embeddings.
  int64_t maxSeqLen = 4096;
  int64_t kvPageSize = 16;
  /// Verify the IR after every pass (slower; tests turn it on).
  bool verifyEach = false;
  /// tx-fold-norm-weight: RMSNorm weights folded into the linears after
  /// them (one rounding moves: bf16(W * g) instead of bf16(x * g)).
  bool foldNormWeights = true;
};

/// Runs txc-to-cpu or txc-to-cuda on `module` in place.
Status runPipeline(mlir::ModuleOp module, const CompileOptions &options);
/// Runs only the tx half (sharding and fusion), for `txc compile --emit=tx`.
Status runTxPipeline(mlir::ModuleOp module, const CompileOptions &options);

/// What `txc compile --stats` prints.
struct PlanStats {
  int64_t launches = 0;
  int64_t launchesPerLayer = 0; // the most launches any one layer needs
  int64_t layers = 0;
  int64_t arenaBytes = 0;
  int64_t weightBytes = 0; // every distinct weight the plans read
};
StatusOr<PlanStats> computePlanStats(mlir::ModuleOp lowered);

/// Where the weights of the artifact come from.
struct WeightOptions {
  /// A safetensors file, index or directory holding the checkpoint.
  std::string checkpoint;
  /// Leave the bytes out (`--no-weights`); the runtime binds `checkpoint`
  /// (or any directory with the same tensors) at load time.
  bool stripped = false;
  /// Stripped, and the runtime fills weights from this seed by default.
  std::optional<uint64_t> randomSeed;
};

/// Turns a lowered, memory-planned module into plans (one per rank) and a
/// weight manifest inside `message`, and writes the artifact to `path`.
/// `progress` receives one line per phase.
Status writeArtifact(mlir::ModuleOp lowered, artifact::pb::Artifact message,
                     const CompileOptions &options, const WeightOptions &weights,
                     const std::string &path,
                     const std::function<void(const std::string &)> &progress = {});

} // namespace txc

#endif // TXC_COMPILER_H
