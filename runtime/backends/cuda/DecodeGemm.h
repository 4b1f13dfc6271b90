//===- DecodeGemm.h - Decode-batch GEMMs on wgmma -------------*- C++ -*-===//
//
// out[m, :] = x[m, :] @ w^T for 1 <= m <= 64: the projections of a decode
// step at batch 9-64, where the skinny GEMM (SkinnyGemm.h) and cuBLASLt
// stream the weights at 1.4-3.3 TB/s (device run 25: Llama-3-8B b32 o_proj
// 1.4, down 3.0, gate/up 3.3 with per-launch events). The weights are the
// wgmma A operand (64 rows a tile, "swap AB"), the batch the N = 32 or 64
// operand, so a tile of 64 weight rows needs one wgmma per 16 of K. Each
// CTA (one warpgroup, one per resident slot) takes an equal share of all
// (tile, 64-wide K chunk) steps (stream-K) and streams them through a
// six-stage cp.async ring, the first four stages' weights requested before
// the PDL wait; a tile shared by CTAs is summed in CTA order by its last
// part (deterministic). The epilogues are the GEMV's (bias, residual add,
// SwiGLU, f32 out), applied once to the finished tile.
// Opt-in (CudaExecutorOptions::decode_gemm): chained with itself at m = 32
// it took Llama-3-8B gate/up 66.6 us, down 42.3, o_proj 20.7 (device run
// 30), ~2.9 TB/s a layer, slower than cuBLASLt inside the model's graph.
// Since then (not yet run on a GPU): one cp.async ring across a CTA's tile
// segments, the epilogue from registers (SwiGLU rows interleaved), the
// shared tile's parts summed with several parts' loads in flight.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_DECODEGEMM_H
#define TXC_RUNTIME_BACKENDS_CUDA_DECODEGEMM_H

#include "runtime/backends/cuda/Gemv.h"

namespace txc::cuda {

/// The most input rows one launch takes (the N = 64 wgmma).
constexpr int64_t kDecodeGemmMaxRows = 64;

/// Partial tiles of CTAs that share a tile, and per-tile counters (zeroed
/// once at allocation; the kernel leaves them zeroed). Too small a
/// workspace gives one tile a CTA instead.
struct DecodeGemmWorkspace {
  float *partials = nullptr;
  int64_t partial_floats = 0;
  unsigned *counters = nullptr;
  int64_t num_counters = 0;
};

/// Whether launchDecodeGemm takes these arguments: 16-bit x and w, out in
/// their type or F32, 1 <= m <= kDecodeGemmMaxRows, k a multiple of 64, x
/// and w 16-byte aligned, n/2 a multiple of 32 for SwiGLU (32 gate rows and
/// their 32 up rows a tile), the residual for kResidualAdd; no fused norm
/// and no rotary epilogue.
bool decodeGemmSupports(const GemvArgs &args);

/// Sets the kernels' shared memory limits and asks their occupancy, which
/// launches need and a graph capture must not do: call once before any.
cudaError_t prepareDecodeGemm();

/// Enqueues it. `out` must not overlap `x` or `w`; it may be the residual.
cudaError_t launchDecodeGemm(const GemvArgs &args, const DecodeGemmWorkspace &workspace,
                             cudaStream_t stream);

} // namespace txc::cuda

#endif // TXC_RUNTIME_BACKENDS_CUDA_DECODEGEMM_H
