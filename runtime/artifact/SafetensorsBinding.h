//===- SafetensorsBinding.h - A safetensors directory as a WeightSource -*- C++ -*-===//
//
// Weight-stripped artifacts bind a checkpoint directory at load. The reader
// lives in runtime/safetensors (txc_safetensors); txc_artifact links it when
// that library is part of the build (TXC_HAVE_SAFETENSORS), and otherwise
// reports that this build cannot read checkpoints.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_ARTIFACT_SAFETENSORSBINDING_H
#define TXC_RUNTIME_ARTIFACT_SAFETENSORSBINDING_H

#include "txc/Status.h"
#include "txc/artifact/WeightSource.h"

#include <memory>
#include <string>

namespace txc::artifact {

StatusOr<std::shared_ptr<const WeightSource>>
openSafetensorsWeightSource(const std::string &directory);

} // namespace txc::artifact

#endif // TXC_RUNTIME_ARTIFACT_SAFETENSORSBINDING_H
