//===- Fuzz_model_config.cpp - Any bytes as config.json -------------------===//
//
// An accepted config must describe a buildable model: the invariants the
// importer and the kernels assume, and tensor shapes that can be computed.
//
//===----------------------------------------------------------------------===//

#include "lib/frontend/CheckpointCheck.h"
#include "lib/frontend/ConfigParser.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

using namespace txc::frontend;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto config =
      parseModelConfig(std::string_view(reinterpret_cast<const char *>(data), size), "fuzz");
  if (!config.isOk())
    return 0;
  const ModelConfig &c = config.value();
  if (!c.architecture || c.numLayers < 1 || c.numLayers > kMaxLayers || c.numKvHeads < 1 ||
      c.numHeads % c.numKvHeads != 0 || c.headDim < 2 || c.headDim % 2 != 0 ||
      c.slidingWindows.size() != static_cast<size_t>(c.numLayers) || !(c.rmsNormEps > 0) ||
      !(c.rope.theta > 0) || !(c.rope.factor > 0))
    std::abort();
  for (const ExpectedTensor &tensor : expectedTensors(c))
    for (int64_t extent : tensor.shape)
      if (extent < 1)
        std::abort();
  return 0;
}
