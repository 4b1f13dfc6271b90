//===- ArtifactTestUtil.h - Small artifacts for the artifact tests --------===//
#ifndef TXC_TEST_UNIT_ARTIFACT_ARTIFACTTESTUTIL_H
#define TXC_TEST_UNIT_ARTIFACT_ARTIFACTTESTUTIL_H

#include "txc/artifact/ArtifactWriter.h"

#include <string>
#include <vector>

namespace txc::artifact::testing {

/// A fresh path under gtest's temp dir, unique per call.
std::string tempPath(const std::string &stem);

/// A message with a tiny Qwen3-like config, compile options, kernels for
/// sm_90a, a tokenizer and a two-launch plan that uses weights 0 and 1 and
/// the arena: everything except the manifest.
pb::Artifact makeMessage();

/// Deterministic bytes of the given length (not zeros, so a mix-up of two
/// tensors is visible).
std::vector<unsigned char> patternBytes(size_t size, unsigned salt);

struct TestWeight {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

/// embed [16, 8] BF16, norm [8] F32, q_proj [8, 8] F16 (odd byte sizes so
/// the 64-byte alignment padding is exercised).
std::vector<TestWeight> makeWeights();

/// Writes makeMessage() with makeWeights() embedded to `path`.
Status writeEmbeddedArtifact(const std::string &path);

std::vector<unsigned char> readFile(const std::string &path);
void writeFile(const std::string &path, const std::vector<unsigned char> &bytes);

} // namespace txc::artifact::testing

#endif
