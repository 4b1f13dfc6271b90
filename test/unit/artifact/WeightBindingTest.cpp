//===- WeightBindingTest.cpp - Stripped artifacts bound to a source -------===//
#include "ArtifactTestUtil.h"

#include "txc/artifact/Artifact.h"
#include "txc/artifact/RandomWeights.h"

#include <gtest/gtest.h>

#include <cstring>

namespace txc::artifact {
namespace {

using testing::makeMessage;
using testing::makeWeights;
using testing::patternBytes;
using testing::tempPath;
using testing::TestWeight;

// A weight-stripped artifact listing makeWeights() without bytes.
std::string writeStrippedArtifact() {
  std::string path = tempPath("stripped.txm");
  ArtifactWriter writer(makeMessage());
  for (TestWeight &weight : makeWeights())
    EXPECT_TRUE(writer.addExternalWeight(weight.name, weight.dtype, weight.shape).isOk());
  EXPECT_TRUE(writer.write(path).isOk());
  return path;
}

std::shared_ptr<InMemoryWeightSource>
sourceWith(std::vector<TestWeight> weights) {
  auto source = std::make_shared<InMemoryWeightSource>("checkpoint /ckpt");
  for (TestWeight &weight : weights)
    source->addTensor(weight.name, weight.dtype, weight.shape, std::move(weight.bytes));
  return source;
}

Status loadWith(const std::string &path, std::shared_ptr<const WeightSource> source) {
  LoadOptions options;
  options.weight_source = std::move(source);
  auto loaded = LoadedArtifact::load(path, options);
  return loaded.isOk() ? Status::ok() : loaded.status();
}

TEST(WeightBindingTest, StrippedArtifactBindsAMatchingSource) {
  std::string path = writeStrippedArtifact();
  auto source = sourceWith(makeWeights());
  LoadOptions options;
  options.weight_source = source;
  auto loaded = LoadedArtifact::load(path, options);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  EXPECT_EQ((*loaded)->weightOrigin(), "checkpoint /ckpt");
  for (const BoundWeight &bound : (*loaded)->weights()) {
    std::optional<TensorView> tensor = source->findTensor(bound.entry->name());
    ASSERT_TRUE(tensor);
    EXPECT_EQ(bound.data, tensor->data) << "bound without copying";
  }
}

TEST(WeightBindingTest, StrippedArtifactWithoutWeightsSaysWhatToPass) {
  std::string path = writeStrippedArtifact();
  auto loaded = LoadedArtifact::load(path);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().message(),
            path + " is weight-stripped: pass a safetensors directory with its 3 "
                   "weights (--weights DIR) or --random-weights SEED");
}

TEST(WeightBindingTest, MissingTensorIsNamed) {
  std::vector<TestWeight> weights = makeWeights();
  weights.erase(weights.begin() + 2);
  Status status = loadWith(writeStrippedArtifact(), sourceWith(weights));
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("weight 'model.layers.0.self_attn.q_proj.weight' "
                                  "(F16 [8, 3]) from the manifest of "),
            std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("is missing from checkpoint /ckpt"),
            std::string::npos);
}

TEST(WeightBindingTest, WrongDtypeIsNamed) {
  std::vector<TestWeight> weights = makeWeights();
  weights[1].dtype = DType::kI32; // same byte count, different type
  std::string path = writeStrippedArtifact();
  Status status = loadWith(path, sourceWith(weights));
  EXPECT_EQ(status.message(), "weight 'model.norm.weight': " + path +
                                  " expects F32, checkpoint /ckpt has I32");
}

TEST(WeightBindingTest, WrongShapeIsNamed) {
  std::vector<TestWeight> weights = makeWeights();
  weights[0].shape = {8, 16}; // same byte count, transposed
  std::string path = writeStrippedArtifact();
  Status status = loadWith(path, sourceWith(weights));
  EXPECT_EQ(status.message(), "weight 'model.embed_tokens.weight': " + path +
                                  " expects shape [16, 8], checkpoint /ckpt "
                                  "has [8, 16]");
}

TEST(WeightBindingTest, EmbeddedChecksumsRejectADifferentCheckpoint) {
  std::string path = tempPath("embedded.txm");
  ASSERT_TRUE(testing::writeEmbeddedArtifact(path).isOk());
  std::vector<TestWeight> weights = makeWeights();
  weights[2].bytes = patternBytes(weights[2].bytes.size(), 99);
  Status status = loadWith(path, sourceWith(weights));
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("differs from the one " + path +
                                  " was compiled with"),
            std::string::npos)
      << status.message();
  // The same tensors as compiled bind fine over the embedded ones.
  EXPECT_TRUE(loadWith(path, sourceWith(makeWeights())).isOk());
}

TEST(WeightBindingTest, MissingSafetensorsDirectoryIsNamed) {
  std::string path = writeStrippedArtifact();
  LoadOptions options;
  options.weights_dir = tempPath("no_such_checkpoint");
  auto loaded = LoadedArtifact::load(path, options);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_NE(loaded.status().message().find(options.weights_dir), std::string::npos)
      << loaded.status().message();
}

// Row-major float tensor whose element (r, c) is 100 * salt + 10 * r + c.
TestWeight floatMatrix(std::string name, int64_t rows, int64_t cols, int salt) {
  std::vector<float> values;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      values.push_back(100.0f * salt + 10.0f * r + c);
  std::vector<unsigned char> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return {std::move(name), DType::kF32, {rows, cols}, std::move(bytes)};
}

std::vector<float> floatsOf(const BoundWeight &bound) {
  std::vector<float> values(bound.bytes / 4);
  std::memcpy(values.data(), bound.data, bound.bytes);
  return values;
}

pb::TensorSlice sliceOf(const std::string &name, int64_t axis = 0,
                        int64_t start = 0, int64_t length = 0) {
  pb::TensorSlice slice;
  slice.set_name(name);
  slice.set_axis(axis);
  slice.set_start(start);
  slice.set_length(length);
  return slice;
}

TEST(WeightBindingTest, FusedAndShardedTensorsAreBuiltFromSlices) {
  pb::Artifact message = makeMessage();
  message.clear_plans(); // this test's manifest does not match the plan
  ArtifactWriter writer(message);
  // Fused QKV: q [4, 3], k [2, 3], v [2, 3] stacked along rows.
  ASSERT_TRUE(writer.addExternalWeight("qkv", DType::kF32, {8, 3},
                                       {sliceOf("q"), sliceOf("k"), sliceOf("v")}, 0)
                  .isOk());
  // Tensor-parallel rank 1 of a row-parallel o_proj [2, 6]: columns [3, 6).
  ASSERT_TRUE(writer.addExternalWeight("o.rank1", DType::kF32, {2, 3},
                                       {sliceOf("o", 1, 3, 3)}, 1)
                  .isOk());
  // gate/up of rank 0 [2 + 2, 2]: rows [0, 2) of each, stacked.
  ASSERT_TRUE(writer.addExternalWeight("gate_up.rank0", DType::kF32, {4, 2},
                                       {sliceOf("gate", 0, 0, 2), sliceOf("up", 0, 0, 2)}, 0)
                  .isOk());
  std::string path = tempPath("fused.txm");
  ASSERT_TRUE(writer.write(path).isOk());

  auto source = sourceWith({floatMatrix("q", 4, 3, 1), floatMatrix("k", 2, 3, 2),
                            floatMatrix("v", 2, 3, 3), floatMatrix("o", 2, 6, 4),
                            floatMatrix("gate", 4, 2, 5), floatMatrix("up", 4, 2, 6)});
  LoadOptions options;
  options.weight_source = source;
  auto loaded = LoadedArtifact::load(path, options);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  const auto &weights = (*loaded)->weights();

  EXPECT_EQ(floatsOf(weights[0]),
            (std::vector<float>{100, 101, 102, 110, 111, 112, 120, 121, 122, 130,
                                131, 132, 200, 201, 202, 210, 211, 212, 300, 301,
                                302, 310, 311, 312}));
  EXPECT_EQ(floatsOf(weights[1]), (std::vector<float>{403, 404, 405, 413, 414, 415}));
  EXPECT_EQ(floatsOf(weights[2]),
            (std::vector<float>{500, 501, 510, 511, 600, 601, 610, 611}));
}

TEST(WeightBindingTest, SlicesThatDoNotFillTheTensorAreRejected) {
  pb::Artifact message = makeMessage();
  message.clear_plans();
  ArtifactWriter writer(message);
  ASSERT_TRUE(writer.addExternalWeight("qk", DType::kF32, {8, 3},
                                       {sliceOf("q"), sliceOf("k")}, 0)
                  .isOk());
  std::string path = tempPath("short.txm");
  ASSERT_TRUE(writer.write(path).isOk());
  Status status = loadWith(path, sourceWith({floatMatrix("q", 4, 3, 1),
                                             floatMatrix("k", 2, 3, 2)}));
  EXPECT_EQ(status.message(), path + ": weight 'qk' [8, 3]: its slices fill 6 of "
                                     "8 along axis 0");
  status = loadWith(path, sourceWith({floatMatrix("q", 4, 3, 1)}));
  EXPECT_EQ(status.message(), path + ": weight 'qk' needs tensor 'k', which is "
                                     "missing from checkpoint /ckpt");
  status = loadWith(path, sourceWith({floatMatrix("q", 4, 3, 1),
                                      floatMatrix("k", 4, 4, 2)}));
  EXPECT_EQ(status.message(), path + ": weight 'qk' [8, 3] cannot be built from "
                                     "'k' [4, 4]: dimension 1 differs");
}

// A folded norm weight (tx-fold-norm-weight): the fused rows' columns times
// a [cols] tensor, in fp32 and rounded once to the weight's dtype.
TEST(WeightBindingTest, ColumnScaleMultipliesTheAssembledColumns) {
  pb::Artifact message = makeMessage();
  message.clear_plans();
  ArtifactWriter writer(message);
  const pb::TensorSlice gamma = sliceOf("norm");
  ASSERT_TRUE(writer.addExternalWeight("qk * norm", DType::kF32, {6, 3},
                                       {sliceOf("q"), sliceOf("k")}, 0, &gamma)
                  .isOk());
  // bf16: 1.5 * (1 + 2^-7) = 1.5 + 3 * 2^-8 lies halfway between 1.5 + 2^-7
  // and 1.5 + 2^-6; rounded once, to even, it is the latter.
  const pb::TensorSlice g = sliceOf("g");
  ASSERT_TRUE(
      writer.addExternalWeight("w * g", DType::kBF16, {1, 2}, {sliceOf("w")}, 0, &g).isOk());
  std::string path = tempPath("scaled.txm");
  ASSERT_TRUE(writer.write(path).isOk());

  std::vector<float> norm = {1.0f, 0.5f, -2.0f};
  std::vector<unsigned char> norm_bytes(12);
  std::memcpy(norm_bytes.data(), norm.data(), 12);
  auto bf16Bytes = [](std::vector<float> values) {
    std::vector<unsigned char> bytes;
    for (float v : values) {
      uint16_t bits = floatToBF16(v);
      bytes.push_back(static_cast<unsigned char>(bits & 0xff));
      bytes.push_back(static_cast<unsigned char>(bits >> 8));
    }
    return bytes;
  };
  const float one_plus = 1.0f + 1.0f / 128; // exact in bf16
  auto source = sourceWith({floatMatrix("q", 4, 3, 1), floatMatrix("k", 2, 3, 2),
                            {"norm", DType::kF32, {3}, norm_bytes},
                            {"w", DType::kBF16, {1, 2}, bf16Bytes({1.5f, 3.0f})},
                            {"g", DType::kBF16, {2}, bf16Bytes({one_plus, 0.5f})}});
  LoadOptions options;
  options.weight_source = source;
  auto loaded = LoadedArtifact::load(path, options);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  const auto &weights = (*loaded)->weights();
  EXPECT_EQ(floatsOf(weights[0]),
            (std::vector<float>{100, 50.5f, -204, 110, 55.5f, -224, 120, 60.5f, -244, 130,
                                65.5f, -264, 200, 100.5f, -404, 210, 105.5f, -424}));
  std::vector<unsigned char> scaled(weights[1].data, weights[1].data + weights[1].bytes);
  EXPECT_EQ(scaled, bf16Bytes({1.5f * one_plus, 1.5f}));
  EXPECT_EQ(bf16ToFloat(floatToBF16(1.5f * one_plus)), 1.5f + 1.0f / 64);

  // A scale that is missing, of another dtype, or of another length.
  Status status = loadWith(path, sourceWith({floatMatrix("q", 4, 3, 1), floatMatrix("k", 2, 3, 2)}));
  EXPECT_EQ(status.message(), path + ": weight 'qk * norm' is scaled by tensor 'norm', which "
                                     "is missing from checkpoint /ckpt");
  status = loadWith(path, sourceWith({floatMatrix("q", 4, 3, 1), floatMatrix("k", 2, 3, 2),
                                      {"norm", DType::kBF16, {3}, bf16Bytes({1, 1, 1})}}));
  EXPECT_EQ(status.message(), path + ": weight 'qk * norm' needs its scale 'norm' as F32, "
                                     "checkpoint /ckpt has BF16");
  status = loadWith(path, sourceWith({floatMatrix("q", 4, 3, 1), floatMatrix("k", 2, 3, 2),
                                      {"norm", DType::kF32, {2}, std::vector<unsigned char>(8)}}));
  EXPECT_EQ(status.message(), path + ": weight 'qk * norm' [6, 3] needs 3 scale elements from "
                                     "[0, ...) of 'norm', but checkpoint /ckpt has shape [2]");
}

TEST(WeightBindingTest, ColumnScaleNeedsSources) {
  ArtifactWriter writer(makeMessage());
  const pb::TensorSlice gamma = sliceOf("norm");
  auto added = writer.addExternalWeight("w", DType::kF32, {2, 3}, {}, 0, &gamma);
  ASSERT_FALSE(added.isOk());
  EXPECT_EQ(added.status().message(), "weight 'w': a column scale needs the sources it scales");
}

} // namespace
} // namespace txc::artifact
