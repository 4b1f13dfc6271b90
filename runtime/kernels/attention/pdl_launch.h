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

#include <utility>

namespace txc::kernels {

/// The carveout (percent, rounded up) whose shared memory holds one CTA of
/// `cta_bytes` (dynamic and static) on an sm_90 SM: 228 KB of shared memory
/// at 100%, 1 KB of it reserved per CTA. The driver rounds it up to the
/// next configuration it has (0, 8, 16, 32, 64, 100, 132, 164, 196, 228 KB).
inline int carveoutPercentFor(int cta_bytes) {
  constexpr int kSharedBytesAt100 = 228 * 1024, kReservedPerCta = 1024;
  const int needed = cta_bytes + kReservedPerCta;
  const int percent = (needed * 100 + kSharedBytesAt100 - 1) / kSharedBytesAt100;
  return percent > 100 ? 100 : percent;
}

/// With cluster_x > 1 the grid runs as thread-block clusters of cluster_x
/// CTAs along x (grid.x a multiple of it). carveout_percent >= 0 asks for
/// that shared-memory carveout (percent of the SM's unified L1 and shared
/// memory) instead of the driver's choice for the kernel: an SM changes its
/// carveout only when idle, so a kernel whose carveout differs from its
/// predecessor's cannot start blocks beside that one's tail.
template <typename... Params, typename... Args>
cudaError_t launchKernelWithCarveout(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                     cudaStream_t stream, bool pdl, unsigned cluster_x, int carveout_percent,
                                     Args &&...args) {
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
  }
  if (carveout_percent >= 0) {
    attributes[count].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
    attributes[count].val.sharedMemCarveout = static_cast<unsigned>(carveout_percent);
    ++count;
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
cudaError_t launchKernelInClusters(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                   cudaStream_t stream, bool pdl, unsigned cluster_x, Args &&...args) {
  return launchKernelWithCarveout(kernel, grid, block, smem, stream, pdl, cluster_x, -1,
                                  std::forward<Args>(args)...);
}

template <typename... Params, typename... Args>
cudaError_t launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                         cudaStream_t stream, bool pdl, Args &&...args) {
  return launchKernelInClusters(kernel, grid, block, smem, stream, pdl, 1u, std::forward<Args>(args)...);
}

} // namespace txc::kernels
