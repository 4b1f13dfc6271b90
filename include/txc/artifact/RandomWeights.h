//===- RandomWeights.h - Deterministic weights from a seed -----*- C++ -*-===//
//
// `--random-weights SEED` runs real model shapes without a checkpoint, for
// benchmarks. Every element is a pure function of (seed, tensor name,
// element index), a counter-based hash, so any slice of any tensor can be
// generated independently, in parallel, on any machine, with the same
// result. Values keep activations at a sane scale through the network:
//   rank >= 2 (linear, embedding): uniform with std 1/sqrt(fan_in), fan_in
//                                  being the last dimension (HF [out, in]);
//   rank 1 named "*norm*":         1 + uniform(-0.05, 0.05);
//   other rank 1 (biases):         uniform(-0.02, 0.02);
//   rank 0:                        uniform(-1, 1).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ARTIFACT_RANDOMWEIGHTS_H
#define TXC_ARTIFACT_RANDOMWEIGHTS_H

#include "txc/DType.h"
#include "txc/Status.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace txc::artifact {

/// The fp32 value of element `index` of tensor `name` (before rounding to
/// the tensor's dtype).
float randomWeightValue(uint64_t seed, std::string_view name,
                        const std::vector<int64_t> &shape, uint64_t index);

/// Fills elements [first_element, first_element + out_bytes / dtype size)
/// of tensor `name` into `out`, so callers can generate a large tensor in
/// chunks (e.g. into a pinned staging buffer). Floating-point dtypes only
/// (F32, F16, BF16, F64); others are an error naming the tensor.
Status fillRandomWeights(uint64_t seed, std::string_view name, DType dtype,
                         const std::vector<int64_t> &shape,
                         uint64_t first_element, unsigned char *out,
                         size_t out_bytes);

/// Round-to-nearest-even conversions used for the fill (and handy for
/// tests and the CPU backend).
uint16_t floatToBF16(float value);
float bf16ToFloat(uint16_t bits);
uint16_t floatToF16(float value);
float f16ToFloat(uint16_t bits);

/// One BF16, F16 or F32 element at `p` (any alignment) as fp32, and back,
/// rounded to nearest even.
float elementToFloat(const unsigned char *p, DType dtype);
void floatToElement(float value, unsigned char *p, DType dtype);

} // namespace txc::artifact

#endif // TXC_ARTIFACT_RANDOMWEIGHTS_H
