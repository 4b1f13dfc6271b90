//===- SkinnyGemm.h - Decode GEMMs of 3-8 rows on tensor cores -*- C++ -*-===//
//
// out[m, :] = x[m, :] @ w^T for m <= kSkinnyGemmMaxRows: the projections of
// a decode step at batch 3-8. The GEMV (Gemv.h) runs its multiply-adds on
// the CUDA cores and became compute-bound past 1-2 rows (measured, run 15:
// Llama-3-8B b4 12.8 ms per step on it against 5.4 on cuBLASLt). This kernel
// feeds mma.sync straight from global memory: each lane loads 16 contiguous
// bytes of a weight row and uses them as its A fragment (the K order inside
// a 32-element block is permuted identically for x, so the dot product is
// unchanged). The epilogues are the GEMV's (bias, residual add, SwiGLU, f32
// out).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_SKINNYGEMM_H
#define TXC_RUNTIME_BACKENDS_CUDA_SKINNYGEMM_H

#include "runtime/backends/cuda/Gemv.h"

namespace txc::cuda {

/// The most input rows one launch takes (one mma tile of 8 tokens).
constexpr int64_t kSkinnyGemmMaxRows = 8;

/// The most rows for which the skinny GEMM beats cuBLASLt, measured on the
/// H200 (device run 16): Qwen3-0.6B (k <= 3072) b4 1.53 ms per step against
/// 1.66 on cuBLASLt, and its per-op time is flat from 4 to 8 rows; at b32
/// 2.53 against 1.66 (and 2.76 with x staged in shared memory, run 23). For
/// Llama-3-8B (k >= 4096) it lost at b4 (6.79 against 5.42) and b32 (11.9
/// against 5.7). Above this, cuBLASLt.
constexpr int64_t skinnyGemmRowLimit(int64_t k) { return k <= 3072 ? 8 : 0; }

/// Whether launchSkinnyGemm takes these arguments: 16-bit x and w, out in
/// their type or F32, 1 <= m <= kSkinnyGemmMaxRows, k a multiple of 32, x
/// and w 16-byte aligned, n a multiple of 16 for SwiGLU (8 gate rows with
/// their 8 up rows), the residual for kResidualAdd; no fused norm and no
/// rotary epilogue.
bool skinnyGemmSupports(const GemvArgs &args);

/// Enqueues it. `out` must not overlap `x` or `w`; it may be the residual.
cudaError_t launchSkinnyGemm(const GemvArgs &args, cudaStream_t stream);

} // namespace txc::cuda

#endif // TXC_RUNTIME_BACKENDS_CUDA_SKINNYGEMM_H
