//===- StagedGemv.h - One-row GEMVs whose weights wait in shared memory -*- C++ -*-===//
//
// The decode step's small projections at batch 1 (Qwen3-0.6B's: 4-13 MB
// each), for comparison with Gemv.cu (CudaExecutorOptions::staged_gemvs,
// default none). Gemv.cu holds its prefetch in registers, a few chunks a
// lane, so the last blocks of a GEMV start only as its predecessor ends
// (device run 100: gate/up ran 3.4 us after its wait although resident
// 8.4 us before it). Here each block has its whole slice of W copied into
// shared memory before it waits for its input, with few registers; 132
// SMs hold ~29 MB. Measured (runs 106-109): the blocks are resident 10 us
// early, yet a GEMV's time after its wait still grows with its weights,
// and the early copies slow the kernel running while they stream; the
// decode step was 0.011-0.085 ms slower on Qwen3-0.6B.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_STAGEDGEMV_H
#define TXC_RUNTIME_BACKENDS_CUDA_STAGEDGEMV_H

#include "runtime/backends/cuda/Gemv.h"

namespace txc::cuda {

/// Whether launchStagedGemv takes these arguments: one input row, 16-bit
/// input and output of one type, k a multiple of 256, no rotary epilogue,
/// and W at most `max_weight_bytes` (the executor's budget: the weights of
/// the GEMVs resident at once must fit the SMs' shared memory).
bool stagedGemvSupports(const GemvArgs &args, int64_t max_weight_bytes);

/// Enqueues out = x W^T with GemvArgs' epilogues (bias, residual add,
/// SwiGLU, the fused norm), as launchGemv computes them for one row.
cudaError_t launchStagedGemv(const GemvArgs &args, cudaStream_t stream);

} // namespace txc::cuda

#endif
