//===- Launch.cuh - Kernel launches with programmatic dependent launch ---===//
//
// A decode step is ~200 small kernels; on the H200 each one's launch and
// ramp costs a few microseconds (bench/README.md), comparable to its work.
// With programmatic dependent launch (PDL) the next kernel's blocks are
// scheduled while this one runs: a kernel calls pdlLaunchDependents() early
// and pdlWait() before it touches anything its predecessor wrote (weights,
// which nobody writes, may be loaded before the wait). Both are no-ops in a
// kernel launched without the attribute. Graph capture keeps the edges.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_LAUNCH_CUH
#define TXC_RUNTIME_BACKENDS_CUDA_LAUNCH_CUH

#include "attention/device_utils.cuh"

#include <cuda_runtime.h>

namespace txc::cuda {

// pdlWait() and pdlLaunchDependents() are the kernel library's.
using kernels::pdlLaunchDependents;
using kernels::pdlWait;

/// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute
/// when `pdl` is set. The kernel must call pdlWait() before reading what the
/// previous launch wrote and before writing anything.
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

} // namespace txc::cuda

#endif
