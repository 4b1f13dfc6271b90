//===- PlanFusion.h - What the CUDA executor may fuse or skip in a plan ---===//
//
// Static analyses of an artifact's launch plan, done once when the executor
// loads it: which launches a later kernel can take over (a norm into the
// next GEMV's prologue, a rope into the decode attention) and which a
// decode step may skip (a gather of rows that are already in order). Each
// answers only from the plan's arena slots, conservatively: a slot another
// launch may still read or write keeps its launch. Host-only, so the rules
// are tested without a GPU (PlanFusionTest).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_PLANFUSION_H
#define TXC_RUNTIME_BACKENDS_CUDA_PLANFUSION_H

#include "runtime/artifact/artifact.pb.h"

#include <set>

namespace txc::cuda {

/// rms_norm launches (one result) whose result only the next launch, a GEMM,
/// reads (as its operand 0): the GEMV can normalise in its prologue.
std::set<int> fusableNorms(const artifact::pb::Plan &plan);

/// rope launches whose query only the next launch, an attention, reads: the
/// decode attention can apply the rope itself.
std::set<int> fusableRopes(const artifact::pb::Plan &plan);

/// gather_last launches whose result a step of one token a sequence may
/// read from the input's slot instead: then row s of the input is sequence
/// s's last token, so the gather is a copy. It needs the same element type
/// and width on both sides, every later read of the result to name its
/// slot exactly, and nothing to write the input's slot until the result's
/// last read (the result's slot being overwritten ends its reads).
std::set<int> identityGathers(const artifact::pb::Plan &plan);

} // namespace txc::cuda

#endif // TXC_RUNTIME_BACKENDS_CUDA_PLANFUSION_H
