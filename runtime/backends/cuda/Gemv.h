//===- Gemv.h - Bandwidth-bound GEMMs of few rows (decode) -------*- C++ -*-===//
//
// out[m, :] = x[m, :] @ w^T for m <= kGemvMaxRows, the shape of every
// projection in a decode step. cuBLASLt spends 10+ µs on these (measured:
// 16 µs per decode GEMM on the Qwen3-0.6B shape, bench/README.md) where the
// weight read takes 1–3 µs; this kernel streams each weight row once through
// shared memory (filled before it waits for its input, Gemv.cu), reuses it
// for all m input rows, and applies the epilogue (bias, residual add,
// SwiGLU, the rotary epilogue) before its one rounding store, so SwiGLU needs
// no fp32 scratch and no second launch.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_GEMV_H
#define TXC_RUNTIME_BACKENDS_CUDA_GEMV_H

#include "runtime/backends/cuda/CudaKernels.h"

#include <cstdint>
#include <cuda_runtime.h>

namespace txc::cuda {

/// The most input rows one launch takes; larger batches go to cuBLASLt.
/// Every warp re-reads the inputs from L1, so their traffic grows with the
/// rows: at 8 rows a Qwen3-0.6B decode step was slower than on cuBLASLt.
constexpr int64_t kGemvMaxRows = 4;

/// The most rows the executor sends to the GEMV for a reduction length k;
/// more go to cuBLASLt. Every input row adds a multiply-add (and the bf16
/// unpacking) per weight element on the CUDA cores and an x read through L1
/// per weight chunk, so m > 1 pays off only on small matrices.
/// Measured on the H200 (bench/RUNLOG.md, run 15), whole decode steps:
/// Qwen3-0.6B (k <= 3072) b2 1.48 ms on the GEMV vs 1.71 on cuBLASLt, b3/b4
/// 2.46/2.48 vs 1.61/1.64; Llama-3-8B (k >= 4096) b2 6.69 vs 5.53, b4 12.8
/// vs 5.42. Batch 1 always takes the GEMV.
constexpr int64_t gemvRowLimit(int64_t k) { return k <= 3072 ? 2 : 1; }

enum class GemvEpilogue {
  kNone,        // out = x w^T (+ bias)
  kResidualAdd, // out = x w^T (+ bias) + residual
  kSwiglu,      // out[:, j] = silu(g_j) * u_j, g = rows [0, n/2), u = [n/2, n)
};

struct GemvArgs {
  const void *x = nullptr;    // [m, k], `type`
  const void *w = nullptr;    // [n, k], `type`
  const void *bias = nullptr; // [n] or null, `bias_type`
  EType bias_type = EType::kF32;
  const void *residual = nullptr; // [m, n], `out_type` (kResidualAdd)
  void *out = nullptr;            // [m, n] ([m, n/2] for kSwiglu), `out_type`
  EType type = EType::kBF16;      // x and w: BF16 or F16
  EType out_type = EType::kBF16;  // `type`, or F32 (the logits)
  int64_t m = 0, n = 0, k = 0;
  GemvEpilogue epilogue = GemvEpilogue::kNone;
  /// With `norm`: x is RMSNorm's input and the GEMV computes
  /// inv_rms(x) * (W . round(x * w)) for the norm weight w ([k], `type`):
  /// the squares are summed in the same pass over x and the scalar inverse
  /// RMS scales the finished dot, so the norm costs no launch and no extra
  /// pass. The rounding sits at x * w instead of at the norm's stored
  /// output (x * inv_rms * w). A null norm_weight: the compiler folded w
  /// into W's columns (tx-fold-norm-weight), so x is read as it is.
  bool norm = false;
  const void *norm_weight = nullptr;
  EType norm_type = EType::kBF16;
  float norm_eps = 0.0f;
  bool pdl = false; // programmatic dependent launch (Launch.cuh)
  /// With pdl: let the next kernel launch once this one's wait released
  /// instead of at its start (its blocks then do not stream weights while
  /// this kernel's predecessor runs).
  bool late_dependents = false;
  /// >= 0: the shared-memory carveout the launch asks for, in percent
  /// (kernels::launchKernelWithCarveout); -1: the driver's choice.
  int carveout_percent = -1;
  /// Diagnostics: the launch's four step-trace slots
  /// (kernels::TraceSlot), or null.
  unsigned long long *trace = nullptr;
  /// The QKV projection's rotary epilogue: with rope_counters set, `out` is
  /// the [m, (heads + 2 kv_heads) * head_dim] QKV (rope.qkv), and the last
  /// block to finish a head runs RopeAppend.cuh on it (q/k-norm, rotary,
  /// the query out, K/V into the cache), so no rope kernel is launched.
  /// rope_counters: kGemvMaxRopeHeads zeroed counters, left zeroed.
  RopeAppendArgs rope;
  unsigned *rope_counters = nullptr;
};

/// Limits of the rotary epilogue: heads in one QKV and the head size.
constexpr int64_t kGemvMaxRopeHeads = 4096;
constexpr int64_t kGemvMaxRopeHeadDim = 256;

/// Whether launchGemv takes these arguments: 16-bit type (out_type the same
/// or F32), 1 <= m <= kGemvMaxRows, k a multiple of 8, x and w 16-byte
/// aligned, n even for SwiGLU; with the rotary epilogue, no other
/// epilogue, out in the input type, head_dim a multiple of 16 up to
/// kGemvMaxRopeHeadDim and n the QKV's width. The caller falls back to
/// cuBLASLt (and a separate rope launch) otherwise.
bool gemvSupports(const GemvArgs &args);

/// How a GEMV cuts the work at m = 1 on bf16 (other cases: 8 warps, 4
/// chunks, 32 warps per SM).
struct GemvConfig {
  int warps_per_block = 8;      // 4 or 8
  int unroll = 2;               // 16-byte chunks per lane per row in flight: 2, 4 or 8
  int target_warps_per_sm = 16; // K is split until the grid has about this many warps per SM
};

/// The configuration launchGemv takes for n weight rows of k, from
/// decode_ops_bench's sweeps (device run 19 of 18 configurations,
/// results/2026-12-01-h200-gemv-sweep-run19.json; run 56 of 30, K split to
/// 256 warps per SM, ...-run56-gemv-sweep.json), each shape's best or
/// within 0.4 us of it, where the model's step agrees:
/// - below 6144 rows: from 4096 rows at k <= 1024 (Qwen3 qkv) 4 warps, 4
///   chunks, K unsplit, ranked in the model (device runs 114-116: fewer
///   blocks let the decode attention after it start early); otherwise 4
///   warps and 4 chunks below k = 4096 (Qwen3 down 3.19 -> 3.10 us, its
///   step of GEMVs 512 -> 498 us with it, run 56; Qwen3 o_proj ranked in
///   the model, device runs 228-230: the b1 step -0.008 ms on an H200 and
///   -0.010 on an H100 against 2 chunks); else 8 warps, 2 chunks (Llama
///   o_proj 9.6, down 28.8);
/// - 6144 rows up to 64k: 4 warps, 4 chunks; 64 warps per SM from k = 4096
///   on (Llama qkv 15.0 -> 13.5 us). Splitting gate/up's K in 4 (256 warps
///   per SM) took it 57.5 -> 53.6 us alone and a step of GEMVs 3961 -> 3940
///   us, but the model's b1 step 4.558 -> 4.826 ms (device runs 56-58):
///   rank GEMV configurations in the model, not in GEMV chains;
/// - the lm_heads (64k rows and more): 4 warps, 2 chunks (Llama 237 -> 232 us).
/// Session 4's rule (by width alone: 8/2/16 below 6144 rows, 4/4/16 from
/// it) took 3773 us a Llama-3-8B step of GEMVs in that sweep, this one
/// ~3725. Fewer chunks in flight and fewer K slices mean fewer registers,
/// more resident blocks and shorter reductions; the wide matrices keep 4
/// chunks, and the long K of Llama's qkv more warps to cover it.
GemvConfig gemvConfigFor(int64_t n, int64_t k);

/// Whether launchGemvWithConfig has the configuration: 4 or 8 warps, 2, 4
/// or 8 chunks, 1-1024 warps per SM.
bool gemvConfigSupported(const GemvConfig &config);

/// Enqueues the GEMV (gemvConfigFor(n, k)). `out` must not overlap `x` or
/// `w`; it may be the residual itself (each element reads its residual
/// before writing it).
cudaError_t launchGemv(const GemvArgs &args, cudaStream_t stream);
/// launchGemv with another configuration (cudaErrorInvalidValue for one
/// that is not built).
cudaError_t launchGemvWithConfig(const GemvArgs &args, const GemvConfig &config,
                                 cudaStream_t stream);

} // namespace txc::cuda

#endif // TXC_RUNTIME_BACKENDS_CUDA_GEMV_H
