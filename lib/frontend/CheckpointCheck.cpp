//===- CheckpointCheck.cpp - Do the weights match config.json? ------------===//

#include "lib/frontend/CheckpointCheck.h"

#include "lib/frontend/ArchitectureTable.h"
#include "runtime/safetensors/StrictJson.h"

#include <map>
#include <set>

namespace txc::frontend {

namespace {

bool isExpected(Presence presence, const ModelConfig &config) {
  switch (presence) {
  case Presence::kAlways:
    return true;
  case Presence::kQkvBias:
    return config.qkvBias;
  case Presence::kOutputProjBias:
    return config.outputProjBias;
  case Presence::kMlpBias:
    return config.mlpBias;
  case Presence::kQkNorm:
    return config.qkNorm;
  case Presence::kUntiedLmHead:
    return !config.tieWordEmbeddings;
  }
  return false;
}

/// Some checkpoints of tied models store lm_head.weight as well; transformers
/// ties it to the embedding regardless, and so does txc.
bool isToleratedWhenNotExpected(Presence presence) { return presence == Presence::kUntiedLmHead; }

std::vector<int64_t> resolveShape(const std::vector<Dim> &dims, const ModelConfig &config) {
  std::vector<int64_t> shape;
  for (Dim dim : dims)
    shape.push_back(resolveDim(dim, config));
  return shape;
}

std::string layerPrefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

/// Visits every tensor name the table knows for this config, with whether
/// the config requires it.
template <typename Visit> void forEachKnownTensor(const ModelConfig &config, Visit visit) {
  const ArchitectureSpec &spec = *config.architecture;
  for (const TensorTemplate &tensor : *spec.globalTensors)
    visit(std::string(tensor.name), tensor);
  for (int64_t layer = 0; layer < config.numLayers; ++layer)
    for (const TensorTemplate &tensor : *spec.layerTensors)
      visit(layerPrefix(layer) + std::string(tensor.name), tensor);
}

} // namespace

std::vector<ExpectedTensor> expectedTensors(const ModelConfig &config) {
  std::vector<ExpectedTensor> expected;
  forEachKnownTensor(config, [&](std::string name, const TensorTemplate &tensor) {
    if (isExpected(tensor.presence, config))
      expected.push_back({std::move(name), resolveShape(tensor.shape, config)});
  });
  return expected;
}

std::vector<Status> checkCheckpointAgainstConfig(const ModelConfig &config,
                                                 const Checkpoint &checkpoint) {
  std::vector<Status> problems;
  std::string architecture(config.architectureName());
  std::set<std::string> accounted;

  forEachKnownTensor(config, [&](std::string name, const TensorTemplate &tensor) {
    const CheckpointTensor *found = checkpoint.find(name);
    bool expected = isExpected(tensor.presence, config);
    if (!found) {
      if (expected)
        problems.push_back(notFound(checkpoint.source() + ": tensor " + quoteForMessage(name) +
                                    " is missing (" + architecture +
                                    " with this config.json needs " +
                                    formatShape(resolveShape(tensor.shape, config)) + ")"));
      return;
    }
    if (!expected && !isToleratedWhenNotExpected(tensor.presence))
      return; // reported below as unknown: the config does not call for it
    accounted.insert(name);
    std::vector<int64_t> shape = resolveShape(tensor.shape, config);
    if (found->shape() != shape)
      problems.push_back(failedPrecondition(
          found->filePath() + ": tensor " + quoteForMessage(name) + ": shape " +
          formatShape(found->shape()) + ", but config.json implies " + formatShape(shape)));
  });

  std::set<std::string> ignored;
  for (int64_t layer = 0; layer < config.numLayers; ++layer)
    for (std::string_view suffix : *config.architecture->ignoredLayerTensors)
      ignored.insert(layerPrefix(layer) + std::string(suffix));

  for (const CheckpointTensor &tensor : checkpoint.tensors()) {
    if (accounted.count(tensor.name()) || ignored.count(tensor.name()))
      continue;
    problems.push_back(failedPrecondition(tensor.filePath() + ": tensor " +
                                          quoteForMessage(tensor.name()) + " is not part of a " +
                                          architecture + " with this config.json"));
  }
  return problems;
}

} // namespace txc::frontend
