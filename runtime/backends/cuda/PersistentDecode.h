//===- PersistentDecode.h - A batch-1 decode step in one kernel -*- C++ -*-===//
//
// A batch-1 decode step is ~5 kernels per layer, and on the H200 each kernel
// boundary costs 4-8 us of a few-microsecond GEMV (bench/README.md, session
// 3): Qwen3-0.6B spends 1.15 ms per step where its weights need 0.28. Here
// the step's GEMVs and decode attention run as phases of one persistent
// kernel: one resident block per slot on every SM, a grid-wide barrier
// between phases, and each GEMV phase's first weight loads issued before the
// barrier (weights are constant), so they stream while the previous phase
// drains.
//
// The executor records phases instead of launching (Launches.cpp) while it
// captures a batch-1 decode graph, and launches this kernel for each run of
// consecutive phases; anything else (embedding, cuBLASLt, copies) ends the
// run. Phase descriptors live in device memory owned by the graph.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_PERSISTENTDECODE_H
#define TXC_RUNTIME_BACKENDS_CUDA_PERSISTENTDECODE_H

#include "attention/params.h"
#include "runtime/backends/cuda/Gemv.h"

namespace txc::cuda {

struct DecodePhase {
  enum class Kind : int32_t { kGemv, kAttention };
  Kind kind = Kind::kGemv;
  GemvArgs gemv;                    // kGemv: m = 1
  kernels::DecodeParams attention;  // kAttention: decode_mma, batch 1
};

/// The attention geometry one persistent kernel is built for (decode_mma
/// with the plain variant: no window, no soft-cap).
struct PersistentDecodeShape {
  EType type = EType::kBF16;
  int head_dim = 128;
  int group = 2; // query heads per KV head
};

/// Whether a kernel is built for this shape: bf16, head_dim 128, GQA group
/// 2, 4 or 8.
bool persistentDecodeSupports(const PersistentDecodeShape &shape);

/// Whether a GEMV can be a phase: m = 1, bf16 in, bf16 or f32 out, K a
/// multiple of 256 (each lane takes whole 16-byte chunks of every row),
/// the GEMV's own limits (gemvSupports).
bool persistentGemvSupports(const GemvArgs &args);

/// Whether decode attention can be a phase: batch 1, the plain variant, the
/// fused split combine (split counters) when split.
bool persistentAttentionSupports(const kernels::DecodeParams &params);

/// Blocks the persistent kernel runs (every one resident at once): SMs x
/// blocks per SM by occupancy, at most 2 per SM.
int persistentDecodeBlocks(const PersistentDecodeShape &shape);

/// Runs phases[0, count) (device memory) in one kernel launch; `barrier`
/// is two zeroed words, left zeroed. Launched with PDL when `pdl`: the first
/// phase waits for the previous kernel instead of a barrier.
cudaError_t launchPersistentDecode(const PersistentDecodeShape &shape, const DecodePhase *phases,
                                   int count, unsigned *barrier, bool pdl, cudaStream_t stream);

} // namespace txc::cuda

#endif // TXC_RUNTIME_BACKENDS_CUDA_PERSISTENTDECODE_H
