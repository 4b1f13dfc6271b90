//===- Sampler.h - Next-token sampling on the GPU ----------------*- C++ -*-===//
//
// The engine's sampler (engine/Sampling.cpp) on the device, draw for draw:
// the same candidate order (by logit, ties to the lower id; id order when
// neither top-k nor top-p asks for an order), the same double-precision
// softmax around the best logit, the same top-p cut and inverse-CDF draw
// with the uniform the host computed from (seed, step). Only the order of
// the double sums differs (parallel), so a draw can differ only where the
// uniform lands within ~1e-15 of a boundary.
//
// Rows are sorted in passes of kSamplerRowsPerPass with one CUB radix sort
// over (row, descending logit) keys, which is stable, so equal logits stay
// in id order. Greedy rows skip nothing: their token is the sorted row's
// first entry.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_SAMPLER_H
#define TXC_RUNTIME_BACKENDS_CUDA_SAMPLER_H

#include "txc/engine/Batch.h"

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace txc::cuda {

constexpr int32_t kSamplerRowsPerPass = 8;

/// Device bytes launchSampling needs as workspace for this vocabulary.
size_t samplingWorkspaceBytes(int32_t vocab);

/// tokens[r] for r < rows (device arrays; `sampling` holds rows entries,
/// `logits` is [rows, vocab] fp32). -1 marks a row with a NaN or only -inf.
cudaError_t launchSampling(const float *logits, int32_t rows, int32_t vocab,
                           const engine::RowSampling *sampling, void *workspace,
                           size_t workspace_bytes, int32_t *tokens, cudaStream_t stream);

} // namespace txc::cuda

#endif
