//===- CheckpointCheck.h - Do the weights match config.json? ---*- C++ -*-===//
//
// The architecture table says which tensors a checkpoint of a family holds
// and how their shapes follow from the config. This compares a checkpoint
// with that, so a wrong head count or a bias the config forgot surfaces as
// a one-line error at import, not as garbage logits later.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_LIB_FRONTEND_CHECKPOINTCHECK_H
#define TXC_LIB_FRONTEND_CHECKPOINTCHECK_H

#include "lib/frontend/ModelConfig.h"
#include "runtime/safetensors/Checkpoint.h"
#include "txc/Status.h"

#include <string>
#include <vector>

namespace txc::frontend {

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

/// The tensors a checkpoint of this config must hold, globals first, then
/// layer by layer in table order.
std::vector<ExpectedTensor> expectedTensors(const ModelConfig &config);

/// Every disagreement, one Status each: a missing tensor, a shape other than
/// the config implies, a tensor the architecture does not know. Empty when
/// the checkpoint fits.
std::vector<Status> checkCheckpointAgainstConfig(const ModelConfig &config,
                                                 const Checkpoint &checkpoint);

} // namespace txc::frontend

#endif // TXC_LIB_FRONTEND_CHECKPOINTCHECK_H
