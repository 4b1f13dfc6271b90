//===- ArtifactWriter.h - Write a compiled model (.txm) --------*- C++ -*-===//
//
// The compiler fills a pb::Artifact with config, options, plans and kernels,
// then adds weights here; write() lays out the blob, computes checksums and
// the content hash, and writes the file atomically (temporary + rename), so
// a crash never leaves a half-written model.txm behind.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ARTIFACT_ARTIFACTWRITER_H
#define TXC_ARTIFACT_ARTIFACTWRITER_H

#include "txc/artifact/Artifact.h"

#include <map>

namespace txc::artifact {

/// The version string written into every artifact (CMake's project version).
const char *txcVersionString();

/// XXH64 of `message` serialized deterministically with content_hash = 0.
uint64_t computeContentHash(const pb::Artifact &message);

class ArtifactWriter {
public:
  /// `message` carries everything except the weight manifest; the writer
  /// owns the manifest, format_version, txc_version and content_hash.
  explicit ArtifactWriter(pb::Artifact message = {});

  pb::Artifact &message() { return message_; }

  /// Embeds a tensor whose bytes the caller keeps alive until write()
  /// returns (an mmapped checkpoint, say). Returns its manifest index.
  StatusOr<uint32_t> addWeight(std::string name, DType dtype,
                               std::vector<int64_t> shape, const void *data,
                               size_t bytes);
  /// Embeds a tensor the writer keeps a copy of.
  StatusOr<uint32_t> addWeightCopy(std::string name, DType dtype,
                                   std::vector<int64_t> shape,
                                   std::vector<unsigned char> bytes);
  /// Lists a tensor without bytes, for weight-stripped artifacts: the loader
  /// binds it from a checkpoint, built from `sources` when it is not a
  /// checkpoint tensor itself (fused QKV, a tensor-parallel shard), its
  /// columns scaled by `column_scale` if given (a folded norm weight; needs
  /// sources).
  StatusOr<uint32_t> addExternalWeight(std::string name, DType dtype,
                                       std::vector<int64_t> shape,
                                       std::vector<pb::TensorSlice> sources = {},
                                       int64_t concat_axis = 0,
                                       const pb::TensorSlice *column_scale = nullptr);

  /// Stripped artifacts only: the loader generates weights from `seed`
  /// unless told otherwise.
  void setRandomWeights(uint64_t seed);

  /// Writes header, message and blob to `path`. Fails without touching
  /// `path` when weights are a mix of embedded and external, or I/O fails.
  Status write(const std::string &path);

private:
  StatusOr<uint32_t> addEntry(std::string name, DType dtype,
                              std::vector<int64_t> shape, size_t bytes);

  pb::Artifact message_;
  // Bytes per manifest index; nullptr for external entries.
  std::vector<const unsigned char *> weight_data_;
  std::vector<std::unique_ptr<std::vector<unsigned char>>> owned_;
  std::map<std::string, uint32_t, std::less<>> index_by_name_;
  bool random_weights_ = false;
};

} // namespace txc::artifact

#endif // TXC_ARTIFACT_ARTIFACTWRITER_H
