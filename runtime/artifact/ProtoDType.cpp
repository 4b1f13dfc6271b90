//===- ProtoDType.cpp - txc::DType <-> the artifact's proto enum ----------===//
//
// The proto enum and txc::DType list the same types in the same order; the
// static_asserts keep them from drifting apart silently.
//
//===----------------------------------------------------------------------===//
#include "txc/artifact/Artifact.h"

#include <limits>

namespace txc::artifact {

static_assert(static_cast<int>(DType::kBF16) == pb::DTYPE_BF16);
static_assert(static_cast<int>(DType::kF32) == pb::DTYPE_F32);
static_assert(static_cast<int>(DType::kF8E5M2) == pb::DTYPE_F8_E5M2);
static_assert(pb::DType_MAX == pb::DTYPE_F8_E5M2);

DType fromProtoDType(pb::DType dtype) {
  if (dtype <= pb::DTYPE_INVALID || dtype > pb::DType_MAX)
    return DType::kInvalid;
  return static_cast<DType>(dtype);
}

pb::DType toProtoDType(DType dtype) { return static_cast<pb::DType>(dtype); }

DType kvCacheDtype(const pb::CompileOptions &options) {
  DType dtype = fromProtoDType(options.kv_cache_dtype());
  if (dtype == DType::kInvalid)
    dtype = fromProtoDType(options.activation_dtype());
  return dtype == DType::kInvalid ? DType::kF32 : dtype;
}

std::optional<uint64_t> numElements(const std::vector<int64_t> &shape) {
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    if (dim != 0 &&
        count > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(dim))
      return std::nullopt;
    count *= static_cast<uint64_t>(dim);
  }
  return count;
}

} // namespace txc::artifact
