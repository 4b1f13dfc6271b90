//===- pdl_launch.h - Kernel launches with programmatic dependent launch --===//
//
// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when
// `pdl` is set: the kernel's blocks may start while the previous kernel on
// the stream drains, so the kernel must call pdlWait() (device_utils.cuh)
// before reading what that kernel wrote and before writing anything. Host
// code only (device_utils.cuh stays NVRTC-compilable); shared by the
// attention launchers and the CUDA backend's kernels.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace txc::kernels {

template <typename... Params, typename... Args>
cudaError_t launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                         cudaStream_t stream, bool pdl, Args &&...args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

} // namespace txc::kernels
