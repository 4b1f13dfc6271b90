//===- WeightManifest.h - the weights a plan reads -------------*- C++ -*-===//
//
// Plans refer to weights by manifest index. A weight is a checkpoint tensor,
// a slice of one (a tensor-parallel shard) or a concatenation of those (a
// fused QKV or gate/up projection), its columns optionally scaled by a
// vector (a folded norm weight); this class names each distinct one once
// and later materialises its bytes, or lists it for a stripped artifact.
//
//===----------------------------------------------------------------------===//

#ifndef TXC_LIB_COMPILER_WEIGHTMANIFEST_H
#define TXC_LIB_COMPILER_WEIGHTMANIFEST_H

#include "runtime/artifact/artifact.pb.h"
#include "txc/DType.h"
#include "txc/Status.h"

#include "mlir/IR/Value.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace txc {
class Checkpoint;
namespace artifact {
class ArtifactWriter;
} // namespace artifact

struct WeightDescriptor {
  std::string name;
  DType dtype = DType::kInvalid;
  std::vector<int64_t> shape;
  /// Checkpoint slices, concatenated along axis 0.
  std::vector<artifact::pb::TensorSlice> sources;
  /// Set: the concatenation's columns times this [cols] tensor
  /// (tx.scale_columns; artifact::scaleColumns).
  std::optional<artifact::pb::TensorSlice> column_scale;
};

class WeightManifest {
public:
  /// The manifest index of weight value `v` (a tx.weight, a tx.concat of
  /// them, or a tx.scale_columns of either by a tx.weight) as rank `rank` of
  /// `tp` sees it.
  StatusOr<uint32_t> indexOf(mlir::Value v, int64_t rank, int64_t tp);

  const std::vector<WeightDescriptor> &entries() const { return entries_; }
  uint64_t totalBytes() const;

  /// Adds every entry to `writer`: bytes from `checkpoint` (converted to the
  /// entry's dtype where the IR asks for another), or, when `checkpoint` is
  /// null, as external entries the runtime binds at load.
  Status addTo(artifact::ArtifactWriter &writer, const Checkpoint *checkpoint) const;

private:
  StatusOr<WeightDescriptor> describe(mlir::Value v, int64_t rank, int64_t tp) const;

  std::vector<WeightDescriptor> entries_;
  std::map<std::string, uint32_t> byName_;
};

} // namespace txc

#endif // TXC_LIB_COMPILER_WEIGHTMANIFEST_H
