//===- kernel_sources.h - Kernel template headers embedded at build time --===//
#pragma once

#include <string>
#include <vector>

namespace txc::codegen {

struct EmbeddedSource {
  std::string name; // include path as the kernels spell it, e.g. "attention/decode.cuh"
  std::string text;
};

/// The headers of runtime/kernels that specializations include.
const std::vector<EmbeddedSource> &embeddedKernelHeaders();

} // namespace txc::codegen
