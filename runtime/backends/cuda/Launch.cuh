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
#include "attention/pdl_launch.h"

#include <cuda_runtime.h>

namespace txc::cuda {

// pdlWait(), pdlLaunchDependents() and the launch are the kernel library's.
using kernels::pdlLaunchDependents;
using kernels::pdlWait;

/// kernel<<<...>>>(args...), with the PDL attribute when `pdl` is set.
using kernels::launchKernel;

} // namespace txc::cuda

#endif
