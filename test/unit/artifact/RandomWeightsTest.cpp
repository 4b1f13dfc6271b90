//===- RandomWeightsTest.cpp - Seeded weights: deterministic, well scaled -===//
#include "ArtifactTestUtil.h"

#include "txc/artifact/Artifact.h"
#include "txc/artifact/RandomWeights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace txc::artifact {
namespace {

using testing::makeMessage;
using testing::tempPath;

std::vector<float> generateF32(uint64_t seed, const std::string &name,
                               std::vector<int64_t> shape) {
  uint64_t count = *numElements(shape);
  std::vector<float> values(count);
  Status status = fillRandomWeights(seed, name, DType::kF32, shape, 0,
                                    reinterpret_cast<unsigned char *>(values.data()),
                                    count * 4);
  EXPECT_TRUE(status.isOk()) << status.toString();
  return values;
}

TEST(RandomWeightsTest, SameSeedSameValuesOtherSeedOtherValues) {
  std::vector<int64_t> shape = {64, 32};
  auto first = generateF32(7, "w", shape);
  EXPECT_EQ(first, generateF32(7, "w", shape));
  EXPECT_NE(first, generateF32(8, "w", shape));
  EXPECT_NE(first, generateF32(7, "other", shape)) << "tensors must not repeat";
}

TEST(RandomWeightsTest, LinearWeightsHaveStdOneOverSqrtFanIn) {
  std::vector<int64_t> shape = {256, 1024};
  auto values = generateF32(1, "model.layers.0.mlp.down_proj.weight", shape);
  double sum = 0, sum_squares = 0, bound = std::sqrt(3.0 / 1024);
  for (float v : values) {
    sum += v;
    sum_squares += double(v) * v;
    ASSERT_LE(std::fabs(v), bound);
  }
  double mean = sum / values.size();
  double stddev = std::sqrt(sum_squares / values.size() - mean * mean);
  EXPECT_NEAR(stddev, 1.0 / 32.0, 0.02 / 32.0);
  EXPECT_NEAR(mean, 0.0, 0.01 / 32.0);
}

TEST(RandomWeightsTest, NormWeightsStayNearOneAndBiasesNearZero) {
  for (float v : generateF32(3, "model.layers.0.input_layernorm.weight", {512}))
    ASSERT_NEAR(v, 1.0f, 0.05f);
  auto bias = generateF32(3, "model.layers.0.self_attn.q_proj.bias", {512});
  for (float v : bias)
    ASSERT_LE(std::fabs(v), 0.02f);
  EXPECT_NE(bias[0], bias[1]);
}

TEST(RandomWeightsTest, ChunksEqualTheWholeTensor) {
  // Callers generate big tensors piecewise into staging buffers.
  std::vector<int64_t> shape = {10, 7};
  auto whole = generateF32(5, "w", shape);
  std::vector<float> pieces(whole.size());
  for (uint64_t first = 0; first < whole.size(); first += 9) {
    uint64_t count = std::min<uint64_t>(9, whole.size() - first);
    ASSERT_TRUE(fillRandomWeights(5, "w", DType::kF32, shape, first,
                                  reinterpret_cast<unsigned char *>(&pieces[first]),
                                  count * 4)
                    .isOk());
  }
  EXPECT_EQ(pieces, whole);
  EXPECT_EQ(whole[13], randomWeightValue(5, "w", shape, 13));
}

TEST(RandomWeightsTest, LargeTensorsFilledInParallelMatchTheSerialValues) {
  std::vector<int64_t> shape = {3000, 4096}; // above the per-thread chunk
  uint64_t count = *numElements(shape);
  std::vector<uint16_t> bf16(count);
  ASSERT_TRUE(fillRandomWeights(11, "big", DType::kBF16, shape, 0,
                                reinterpret_cast<unsigned char *>(bf16.data()),
                                count * 2)
                  .isOk());
  for (uint64_t index : {uint64_t{0}, uint64_t{4194303}, uint64_t{4194304},
                         count / 2 + 1, count - 1})
    EXPECT_EQ(bf16[index], floatToBF16(randomWeightValue(11, "big", shape, index)))
        << index;
}

TEST(RandomWeightsTest, IntegerTensorsAreRefusedByName) {
  std::vector<unsigned char> out(16);
  Status status = fillRandomWeights(1, "model.scales", DType::kI32, {4}, 0,
                                    out.data(), out.size());
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(status.message(), "random weights: tensor 'model.scales' has dtype "
                              "I32; only F32, F16, BF16 and F64 can be generated");
}

TEST(RandomWeightsTest, HalfPrecisionConversionsRoundToNearestEven) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBF16(-2.0f), 0xC000);
  // 1 + 2^-8 lies halfway between two bf16 values: ties go to even (1.0).
  EXPECT_EQ(floatToBF16(1.00390625f), 0x3F80);
  EXPECT_EQ(floatToBF16(1.01171875f), 0x3F82); // 1 + 3*2^-8: up to even
  EXPECT_EQ(floatToF16(1.0f), 0x3C00);
  EXPECT_EQ(floatToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToF16(70000.0f), 0x7C00);
  EXPECT_EQ(floatToF16(-0.0f), 0x8000);
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -24)), 0x0001); // smallest subnormal
  // Every finite half survives float and back exactly.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7C00) == 0x7C00)
      continue;
    ASSERT_EQ(floatToF16(f16ToFloat(static_cast<uint16_t>(bits))), bits) << bits;
  }
  for (uint32_t bits = 0; bits < 0x10000; bits += 7) {
    if ((bits & 0x7F80) == 0x7F80)
      continue;
    ASSERT_EQ(floatToBF16(bf16ToFloat(static_cast<uint16_t>(bits))), bits) << bits;
  }
}

TEST(RandomWeightsTest, LoaderGeneratesTheManifestFromASeed) {
  pb::Artifact message = makeMessage();
  message.clear_plans();
  ArtifactWriter writer(message);
  ASSERT_TRUE(writer.addExternalWeight("embed", DType::kBF16, {16, 8}).isOk());
  ASSERT_TRUE(writer.addExternalWeight("final_norm.weight", DType::kF32, {8}).isOk());
  writer.setRandomWeights(1234);
  std::string path = tempPath("random.txm");
  ASSERT_TRUE(writer.write(path).isOk());

  auto loaded = LoadedArtifact::load(path);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  EXPECT_EQ((*loaded)->weightOrigin(), "random weights (seed 1234)");
  const BoundWeight &embed = (*loaded)->weights()[0];
  uint16_t element5;
  std::memcpy(&element5, embed.data + 10, 2);
  EXPECT_EQ(element5, floatToBF16(randomWeightValue(1234, "embed", {16, 8}, 5)));

  // --random-weights overrides the recorded seed.
  LoadOptions options;
  options.random_weights_seed = 99;
  auto reseeded = LoadedArtifact::load(path, options);
  ASSERT_TRUE(reseeded.isOk());
  EXPECT_NE(std::memcmp((*reseeded)->weights()[0].data, embed.data, embed.bytes), 0);
}

} // namespace
} // namespace txc::artifact
