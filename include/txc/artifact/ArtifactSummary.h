//===- ArtifactSummary.h - What is inside a .txm, for people ---*- C++ -*-===//
//
// `txc inspect model.txm` prints this: versions, hash, model config,
// compile options, launches per op, kernels per target, and the weights.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ARTIFACT_ARTIFACTSUMMARY_H
#define TXC_ARTIFACT_ARTIFACTSUMMARY_H

#include "txc/artifact/Artifact.h"

#include <string>

namespace txc::artifact {

/// A multi-line, human-readable description. `max_weights_listed` caps the
/// per-tensor lines (the totals always cover every weight).
std::string summarizeArtifact(const pb::Artifact &message,
                              const ArtifactHeader &header,
                              size_t max_weights_listed = 16);

} // namespace txc::artifact

#endif // TXC_ARTIFACT_ARTIFACTSUMMARY_H
