//===- SafetensorsBinding.h - A checkpoint as a WeightSource ---*- C++ -*-===//
//
// Weight-stripped artifacts bind a checkpoint at load (`--weights DIR`).
// The reader is runtime/safetensors; this adapts its Checkpoint to the
// artifact's WeightSource so binding checks stay in one place.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_ARTIFACT_SAFETENSORSBINDING_H
#define TXC_RUNTIME_ARTIFACT_SAFETENSORSBINDING_H

#include "txc/Status.h"
#include "txc/artifact/WeightSource.h"

#include <memory>
#include <string>

namespace txc::artifact {

/// `path`: a model directory (model.safetensors or a sharded index), a
/// .safetensors file, or a *.index.json file.
StatusOr<std::shared_ptr<const WeightSource>>
openSafetensorsWeightSource(const std::string &path);

} // namespace txc::artifact

#endif // TXC_RUNTIME_ARTIFACT_SAFETENSORSBINDING_H
