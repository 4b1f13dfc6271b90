//===- Fuzz_shard_index.cpp - Any bytes as model.safetensors.index.json ---===//
//
// An accepted index must only name shards beside it: no path can escape.
//
//===----------------------------------------------------------------------===//

#include "runtime/safetensors/Checkpoint.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto index = txc::parseShardIndex(
      std::string_view(reinterpret_cast<const char *>(data), size), "fuzz");
  if (!index.isOk())
    return 0;
  for (const auto &[tensor, shard] : index->weightMap)
    if (shard.empty() || shard == ".." || shard.find('/') != std::string::npos)
      std::abort();
  return 0;
}
