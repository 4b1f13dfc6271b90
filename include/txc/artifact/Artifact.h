//===- Artifact.h - Load a compiled model (.txm) ---------------*- C++ -*-===//
//
// The reader side of the artifact: map the file, validate header, message
// and content hash, and bind every weight of the manifest to bytes (the
// mmapped blob, a safetensors directory, or seeded random values). Every
// failure comes back as a Status naming the file and the limit; nothing is
// thrown and nothing aborts. The runtime never needs MLIR to do this.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ARTIFACT_ARTIFACT_H
#define TXC_ARTIFACT_ARTIFACT_H

#include "runtime/artifact/artifact.pb.h"
#include "txc/DType.h"
#include "txc/Status.h"
#include "txc/artifact/ArtifactFormat.h"
#include "txc/artifact/WeightSource.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace txc {
class MappedFile;
} // namespace txc

namespace txc::artifact {


DType fromProtoDType(pb::DType dtype);
pb::DType toProtoDType(DType dtype);
/// Product of the dimensions; nullopt on a negative dimension or overflow.
std::optional<uint64_t> numElements(const std::vector<int64_t> &shape);

struct LoadOptions {
  /// Bind the weights from this source instead of the artifact's own.
  std::shared_ptr<const WeightSource> weight_source;
  /// A safetensors directory (`--weights DIR`), for weight-stripped
  /// artifacts. Needs the runtime/safetensors reader in the build.
  std::string weights_dir;
  /// Generate weights from this seed whatever the artifact holds
  /// (`--random-weights SEED`), to benchmark real shapes without a
  /// checkpoint. See RandomWeights.h for the values.
  std::optional<uint64_t> random_weights_seed;
  /// False: parse and validate only, bind nothing (`txc inspect`).
  bool bind_weights = true;
  bool verify_content_hash = true;
  /// XXH64 of every weight that has a checksum. Touches every page of the
  /// blob once, at roughly memory bandwidth.
  bool verify_weight_checksums = true;
};

/// A manifest entry bound to its bytes.
struct BoundWeight {
  const pb::WeightEntry *entry = nullptr;
  DType dtype = DType::kInvalid;
  std::vector<int64_t> shape;
  const unsigned char *data = nullptr;
  size_t bytes = 0;
};

class LoadedArtifact {
public:
  static StatusOr<std::unique_ptr<LoadedArtifact>>
  load(const std::string &path, const LoadOptions &options = {});
  ~LoadedArtifact();
  LoadedArtifact(const LoadedArtifact &) = delete;
  LoadedArtifact &operator=(const LoadedArtifact &) = delete;

  const std::string &path() const { return path_; }
  const pb::Artifact &message() const { return message_; }
  const pb::ModelConfig &config() const { return message_.config(); }
  const pb::CompileOptions &options() const { return message_.options(); }
  const ArtifactHeader &header() const { return header_; }

  /// Empty when loaded with bind_weights = false.
  const std::vector<BoundWeight> &weights() const { return weights_; }
  /// nullptr when the manifest has no such name (or weights are unbound).
  const BoundWeight *findWeight(std::string_view name) const;
  /// "embedded blob", "safetensors directory DIR", "random weights (seed 7)".
  const std::string &weightOrigin() const { return weight_origin_; }
  /// The kernels compiled for `target` ("sm_90a"), or nullptr.
  const pb::TargetKernels *kernelsFor(std::string_view target) const;

private:
  LoadedArtifact() = default;
  Status bindWeights(const LoadOptions &options);
  Status bindFromBlob(bool verify_checksums);
  Status bindFromSource(const WeightSource &source, bool verify_checksums);
  Status bindRandom(uint64_t seed);

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  ArtifactHeader header_;
  pb::Artifact message_;
  std::vector<BoundWeight> weights_;
  std::string weight_origin_;
  // Keeps borrowed bytes alive: the source bound at load, and buffers the
  // loader had to build (random weights, tensors fused from slices).
  std::shared_ptr<const WeightSource> source_;
  std::vector<std::unique_ptr<unsigned char[]>> owned_buffers_;
};

/// The KV cache's element type under these options: kv_cache_dtype, else
/// the activations' dtype, else f32.
DType kvCacheDtype(const pb::CompileOptions &options);

/// Whether some launch of `plan` writes the step's logits (a result that is
/// the STEP_INPUT_LOGITS step input); a backend cannot run a plan that does
/// not.
bool planWritesLogits(const pb::Plan &plan);

/// Structural checks of a parsed message against itself: plan references
/// within the manifest and the arena, manifest entries within the blob and
/// consistent with their dtype and shape. `path` names the file in errors.
Status validateArtifactMessage(const pb::Artifact &message,
                               uint64_t blob_bytes, const std::string &path);

} // namespace txc::artifact

#endif // TXC_ARTIFACT_ARTIFACT_H
