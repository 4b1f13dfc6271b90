//===- pdl_launch.h - Kernel launches with programmatic dependent launch --===//
//
// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when
// `pdl` is set (and, for launchKernelInClusters, in thread-block clusters): the kernel's blocks may start while the previous kernel on
// the stream drains, so the kernel must call pdlWait() (device_utils.cuh)
// before reading what that kernel wrote and before writing anything. Host
// code only (device_utils.cuh stays NVRTC-compilable); shared by the
// attention launchers and the CUDA backend's kernels.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <utility>

namespace txc::kernels {

/// The shared-memory carveout (percent of an SM's unified L1 and shared
/// memory; -1: the driver's choice per kernel) that every launch with the
/// PDL attribute asks for. An SM changes its carveout only when it is
/// idle, so a kernel that gets another carveout than its predecessor's (a
/// GEMV with a few bytes of shared memory, then the decode attention with
/// 100 KB) cannot start blocks beside that kernel's tail: PDL's overlap is
/// lost at every such boundary. One carveout for the whole step keeps it.
/// Process-wide, because it only works when every kernel of the step
/// agrees; the CUDA backend sets it at creation.
inline std::atomic<int> &pdlCarveoutPercent() {
  static std::atomic<int> percent{-1};
  return percent;
}

/// With cluster_x > 1 the grid runs as thread-block clusters of cluster_x
/// CTAs along x (grid.x a multiple of it).
template <typename... Params, typename... Args>
cudaError_t launchKernelInClusters(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                   cudaStream_t stream, bool pdl, unsigned cluster_x, Args &&...args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attributes[3];
  unsigned count = 0;
  if (pdl) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
    if (const int carveout = pdlCarveoutPercent().load(std::memory_order_relaxed); carveout >= 0) {
      attributes[count].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
      attributes[count].val.sharedMemCarveout = static_cast<unsigned>(carveout);
      ++count;
    }
  }
  if (cluster_x > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = cluster_x;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  config.attrs = attributes;
  config.numAttrs = count;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

template <typename... Params, typename... Args>
cudaError_t launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                         cudaStream_t stream, bool pdl, Args &&...args) {
  return launchKernelInClusters(kernel, grid, block, smem, stream, pdl, 1u, std::forward<Args>(args)...);
}

} // namespace txc::kernels
