//===- ArtifactRoundTripTest.cpp - Write, load, compare -------------------===//
#include "ArtifactTestUtil.h"

#include "txc/artifact/Artifact.h"
#include "txc/artifact/ArtifactSummary.h"

#include <gtest/gtest.h>

#include <cstring>

namespace txc::artifact {
namespace {

using testing::makeMessage;
using testing::makeWeights;
using testing::readFile;
using testing::tempPath;
using testing::writeEmbeddedArtifact;

TEST(ArtifactRoundTripTest, LoadGivesBackMessageAndWeights) {
  std::string path = tempPath("roundtrip.txm");
  ASSERT_TRUE(writeEmbeddedArtifact(path).isOk());

  auto loaded = LoadedArtifact::load(path);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  const LoadedArtifact &artifact = **loaded;

  pb::Artifact expected = makeMessage();
  EXPECT_EQ(artifact.config().SerializeAsString(),
            expected.config().SerializeAsString());
  EXPECT_EQ(artifact.options().SerializeAsString(),
            expected.options().SerializeAsString());
  ASSERT_EQ(artifact.message().plans_size(), 1);
  const pb::Launch &norm = artifact.message().plans(0).launches(1);
  EXPECT_EQ(norm.op(), "txk.rms_norm");
  EXPECT_DOUBLE_EQ(norm.attributes().at("eps").float_value(), 1e-6);
  EXPECT_EQ(norm.attributes().at("family").string_value(), "warp_per_row");
  ASSERT_EQ(norm.attributes().at("tile").int_list().values_size(), 2);
  EXPECT_EQ(norm.attributes().at("tile").int_list().values(1), 64);
  EXPECT_EQ(norm.operands(1).weight_index(), 1u);
  EXPECT_EQ(artifact.message().tokenizer_json(), expected.tokenizer_json());
  EXPECT_EQ(artifact.message().format_version(), kArtifactFormatVersion);
  EXPECT_FALSE(artifact.message().txc_version().empty());
  EXPECT_EQ(artifact.message().weight_storage(), pb::WEIGHTS_EMBEDDED);
  EXPECT_EQ(artifact.weightOrigin(), "embedded blob");

  const pb::TargetKernels *kernels = artifact.kernelsFor("sm_90a");
  ASSERT_NE(kernels, nullptr);
  EXPECT_EQ(kernels->kernels(0).cubin(), expected.kernels(0).kernels(0).cubin());
  EXPECT_EQ(artifact.kernelsFor("sm_80"), nullptr);

  std::vector<testing::TestWeight> weights = makeWeights();
  ASSERT_EQ(artifact.weights().size(), weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    const BoundWeight &bound = artifact.weights()[i];
    EXPECT_EQ(bound.entry->name(), weights[i].name);
    EXPECT_EQ(bound.dtype, weights[i].dtype);
    EXPECT_EQ(bound.shape, weights[i].shape);
    ASSERT_EQ(bound.bytes, weights[i].bytes.size());
    EXPECT_EQ(std::memcmp(bound.data, weights[i].bytes.data(), bound.bytes), 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(bound.data) % kBlobAlignment, 0u)
        << bound.entry->name();
    EXPECT_NE(bound.entry->checksum(), 0u);
  }
  // All weights point into one mapping laid out as the manifest says: the
  // loader maps the blob, it does not copy tensors one by one.
  const BoundWeight &first = artifact.weights()[0];
  const BoundWeight &last = artifact.weights()[2];
  EXPECT_EQ(static_cast<uint64_t>(last.data - first.data),
            last.entry->offset() - first.entry->offset());
  EXPECT_EQ(artifact.findWeight("model.norm.weight"), &artifact.weights()[1]);
  EXPECT_EQ(artifact.findWeight("lm_head.weight"), nullptr);
}

TEST(ArtifactRoundTripTest, FileLayoutFollowsTheHeader) {
  std::string path = tempPath("layout.txm");
  ASSERT_TRUE(writeEmbeddedArtifact(path).isOk());
  std::vector<unsigned char> bytes = readFile(path);
  ASSERT_GE(bytes.size(), kArtifactHeaderBytes);
  EXPECT_EQ(std::memcmp(bytes.data(), "TXCARTF\0", 8), 0);
  auto header = decodeArtifactHeader(bytes.data(), bytes.size(), path);
  ASSERT_TRUE(header.isOk()) << header.status().toString();
  EXPECT_EQ(header->message_offset, kArtifactHeaderBytes);
  EXPECT_EQ(header->blob_offset % kBlobAlignment, 0u);
  EXPECT_GE(header->blob_offset, header->message_offset + header->message_bytes);
  EXPECT_EQ(header->blob_offset + header->blob_bytes, bytes.size());
}

TEST(ArtifactRoundTripTest, WritingTwiceGivesIdenticalBytes) {
  // Map-valued launch attributes must serialize in a fixed order, or the
  // content hash (and compile caches keyed on it) would flicker.
  std::string first = tempPath("a.txm"), second = tempPath("b.txm");
  ASSERT_TRUE(writeEmbeddedArtifact(first).isOk());
  ASSERT_TRUE(writeEmbeddedArtifact(second).isOk());
  EXPECT_EQ(readFile(first), readFile(second));
}

TEST(ArtifactRoundTripTest, ContentHashCoversWeightsAndPlan) {
  pb::Artifact message = makeMessage();
  uint64_t base = computeContentHash(message);
  pb::Artifact changed_plan = message;
  (*changed_plan.mutable_plans(0)->mutable_launches(1)->mutable_attributes())["eps"]
      .set_float_value(1e-5);
  EXPECT_NE(computeContentHash(changed_plan), base);
  pb::Artifact changed_hash_field = message;
  changed_hash_field.set_content_hash(12345);
  EXPECT_EQ(computeContentHash(changed_hash_field), base)
      << "the hash must not cover its own field";
}

TEST(ArtifactRoundTripTest, InspectLoadsWithoutBindingWeights) {
  std::string path = tempPath("inspect.txm");
  ArtifactWriter writer(makeMessage());
  for (testing::TestWeight &weight : makeWeights())
    ASSERT_TRUE(writer.addExternalWeight(weight.name, weight.dtype, weight.shape).isOk());
  ASSERT_TRUE(writer.write(path).isOk());
  LoadOptions options;
  options.bind_weights = false;
  auto loaded = LoadedArtifact::load(path, options);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  EXPECT_EQ((*loaded)->message().weight_storage(), pb::WEIGHTS_EXTERNAL);
  EXPECT_EQ((*loaded)->message().weights_size(), 3);
  EXPECT_TRUE((*loaded)->weights().empty());
  EXPECT_EQ((*loaded)->header().blob_bytes, 0u);
}

TEST(ArtifactWriterTest, RefusesInconsistentWeights) {
  ArtifactWriter writer(makeMessage());
  std::vector<unsigned char> bytes(10);
  auto wrong_size = writer.addWeightCopy("w", DType::kF32, {2, 2}, bytes);
  ASSERT_FALSE(wrong_size.isOk());
  EXPECT_NE(wrong_size.status().message().find("needs 16"), std::string::npos)
      << wrong_size.status().message();

  ASSERT_TRUE(writer.addWeightCopy("a", DType::kF32, {2}, std::vector<unsigned char>(8)).isOk());
  auto duplicate = writer.addWeightCopy("a", DType::kF32, {2}, std::vector<unsigned char>(8));
  ASSERT_FALSE(duplicate.isOk());
  EXPECT_NE(duplicate.status().message().find("added twice"), std::string::npos);

  ASSERT_TRUE(writer.addExternalWeight("b", DType::kF32, {2}).isOk());
  std::string path = tempPath("mixed.txm");
  Status mixed = writer.write(path);
  ASSERT_FALSE(mixed.isOk());
  EXPECT_NE(mixed.message().find("'b' has no bytes"), std::string::npos)
      << mixed.message();
  EXPECT_TRUE(readFile(path).empty()) << "a failed write must leave no file";
}

TEST(ArtifactWriterTest, RefusesAPlanThatPointsOutsideTheManifest) {
  // makeMessage's plan uses weights 0 and 1; give it only one.
  ArtifactWriter writer(makeMessage());
  ASSERT_TRUE(writer.addWeightCopy("only", DType::kF32, {1}, std::vector<unsigned char>(4)).isOk());
  Status status = writer.write(tempPath("dangling.txm"));
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("launch 1 (txk.rms_norm) operand 1 refers to "
                                  "weight 1, but the manifest has 1"),
            std::string::npos)
      << status.message();
}

/// makeMessage's plan reads weights 0 and 1: two one-float entries, the
/// weights external, so validation gets past the manifest.
void bindTwoExternalWeights(pb::Artifact &message) {
  for (int i = 0; i < 2; ++i) {
    pb::WeightEntry *entry = message.add_weights();
    entry->set_name("w" + std::to_string(i));
    entry->set_dtype(pb::DTYPE_F32);
    entry->add_shape(1);
    entry->set_bytes(4);
  }
  message.set_weight_storage(pb::WEIGHTS_EXTERNAL);
}

TEST(ArtifactValidationTest, ArenaSlotsMustLieInsideTheArena) {
  pb::Artifact message = makeMessage();
  message.mutable_plans(0)->set_arena_bytes(3000); // slot 2 ends at 4096
  bindTwoExternalWeights(message);
  Status status = validateArtifactMessage(message, 0, "m.txm");
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.message(), "m.txm: plan 0 launch 1 (txk.rms_norm) result 0 "
                              "uses arena bytes [2048, 4096), beyond the arena "
                              "of 3000 bytes");
}

TEST(ArtifactValidationTest, KvPageSizeAboveTheBoundIsRefused) {
  // The backends size a page as 2 * page_size * kv_heads * head_dim from a
  // 32-bit page_size: a hand-made artifact must not get past the bound txc
  // compile applies (the writer and the loader both validate).
  pb::Artifact message = makeMessage();
  bindTwoExternalWeights(message);
  message.mutable_options()->set_kv_page_size(kMaxKvPageSize);
  EXPECT_TRUE(validateArtifactMessage(message, 0, "m.txm").isOk());
  message.mutable_options()->set_kv_page_size(kMaxKvPageSize + 1);
  Status status = validateArtifactMessage(message, 0, "m.txm");
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.message(), "m.txm: compile option kv_page_size is " +
                                  std::to_string(kMaxKvPageSize + 1) +
                                  "; the runtime takes at most " + std::to_string(kMaxKvPageSize));
  message.mutable_options()->set_kv_page_size(int64_t{1} << 30);
  EXPECT_FALSE(validateArtifactMessage(message, 0, "m.txm").isOk());
}

TEST(ArtifactSummaryTest, NamesModelPlanKernelsAndWeights) {
  std::string path = tempPath("summary.txm");
  ASSERT_TRUE(writeEmbeddedArtifact(path).isOk());
  auto loaded = LoadedArtifact::load(path);
  ASSERT_TRUE(loaded.isOk());
  std::string summary =
      summarizeArtifact((*loaded)->message(), (*loaded)->header(), /*max=*/2);
  for (const char *expected :
       {"model: Qwen3ForCausalLM (qwen3), 1 layers, hidden 8",
        "scaling yarn x4", "qk-norm", "compiled for sm_90a, tp 1",
        "plan 0: 2 launches, arena 4.00 KiB", "  1 x txk.rms_norm",
        "kernels for sm_90a: 1 modules, 1 entry points",
        "weights: 3 tensors, 336 B, embedded",
        "  model.embed_tokens.weight BF16 [16, 8]", "  ... 1 more",
        "tokenizer: 40 B of tokenizer.json"})
    EXPECT_NE(summary.find(expected), std::string::npos)
        << "missing \"" << expected << "\" in:\n" << summary;
}

} // namespace
} // namespace txc::artifact
