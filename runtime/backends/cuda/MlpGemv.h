//===- MlpGemv.h - The MLP's two one-row GEMVs in one kernel ------*- C++ -*-===//
//
// A decode step's MLP at batch 1 is two GEMVs, gate/up with SwiGLU (and the
// deferred norm) and down with the residual add, and so two kernel
// boundaries: the down projection waits ~0.8 us for PDL's release after
// gate/up's last block exits, and its blocks become resident only as
// gate/up's drain, so its weights start streaming late. Here one grid of
// co-resident blocks runs gate/up, meets at a grid barrier, and runs down:
// no boundary between them, and the down projection's rows can be asked of
// the L2 at the kernel's start. Each phase walks its pairs exactly as
// Gemv.cu's kernel does for the same configuration (the lanes' chunk order,
// the butterfly, the slices summed in order, GemvMath.cuh's epilogue), so
// the result is bit-identical to the two launches.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_MLPGEMV_H
#define TXC_RUNTIME_BACKENDS_CUDA_MLPGEMV_H

#include "runtime/backends/cuda/Gemv.h"

#include <cuda_runtime.h>

namespace txc::cuda {

/// The grid barrier's words: kMlpBarrierWords zeroed 64-bit words the
/// executor owns, one set per launch site (every launch on a set must have
/// the same grid). Counts only grow, so nothing is reset between launches.
struct MlpGridBarrier {
  unsigned long long *words = nullptr;
};
/// 16 group counts, the top count and 16 group flags, each on its own
/// 128-byte line (16 words apart).
constexpr int kMlpBarrierGroups = 16;
constexpr int kMlpBarrierWordStride = 16;
constexpr int64_t kMlpBarrierWords = (2 * kMlpBarrierGroups + 1) * kMlpBarrierWordStride;

struct MlpGemvArgs {
  GemvArgs gate_up; // epilogue kSwiglu, out = down.x
  GemvArgs down;    // epilogue kResidualAdd
  MlpGridBarrier barrier;
  bool pdl = false;
  /// With pdl: the next kernel may launch once every block has passed the
  /// grid barrier, not at their start (its blocks then take no SM room
  /// while gate/up streams).
  bool late_dependents = false;
  unsigned long long *trace = nullptr; // four step-trace slots, or null
};

/// Whether launchMlpGemv takes these: both GEMVs one row (m = 1) on 16-bit
/// types that launchGemv takes, gate/up SwiGLU into down's input, down with
/// the residual add (each may have a bias); and both with blocks of 4
/// warps in launchGemv's configuration (gemvConfigFor), whose walk the
/// phases reproduce with its K slices: Qwen3-0.6B's MLP (gate/up unsplit,
/// down over 4 warps), not Llama-3-8B's (down on blocks of 8 warps).
bool mlpGemvSupports(const MlpGemvArgs &args);

/// Enqueues the fused MLP; cudaErrorInvalidValue where mlpGemvSupports is
/// false. A block takes one unit of each phase, and all must be resident
/// at once (the grid barrier): mlpGemvSupports also asks that the grid be
/// at most what the occupancy calculator puts on the GPU, and a block that
/// waits at the barrier for over a second traps (another workload holding
/// SMs) rather than hang.
cudaError_t launchMlpGemv(const MlpGemvArgs &args, cudaStream_t stream);

} // namespace txc::cuda

#endif // TXC_RUNTIME_BACKENDS_CUDA_MLPGEMV_H
