//===- ConfigProto.h - ModelConfig -> the artifact's config -----*- C++ -*-===//

#ifndef TXC_LIB_COMPILER_CONFIGPROTO_H
#define TXC_LIB_COMPILER_CONFIGPROTO_H

#include "lib/frontend/ModelConfig.h"
#include "runtime/artifact/artifact.pb.h"

namespace txc {

/// What the runtime needs to know about the model, without the frontend.
artifact::pb::ModelConfig toProto(const frontend::ModelConfig &config);

} // namespace txc

#endif // TXC_LIB_COMPILER_CONFIGPROTO_H
