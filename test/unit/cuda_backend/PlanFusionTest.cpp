//===- PlanFusionTest.cpp - What the CUDA executor may fuse or skip -------===//
//
// Host-only: hand-built plans of arena slots, where a launch's operands and
// results are all that the analyses look at.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/PlanFusion.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace txc::cuda {
namespace {

namespace pb = artifact::pb;

pb::ValueRef slot(uint64_t offset, uint64_t bytes = 256, int64_t cols = 64,
                  pb::DType dtype = pb::DTYPE_BF16) {
  pb::ValueRef ref;
  pb::ArenaSlot *arena = ref.mutable_arena();
  arena->set_offset(offset);
  arena->set_bytes(bytes);
  arena->add_shape(-1);
  arena->add_shape(cols);
  arena->set_dtype(dtype);
  return ref;
}

pb::ValueRef weight(uint32_t index) {
  pb::ValueRef ref;
  ref.set_weight_index(index);
  return ref;
}

void add(pb::Plan &plan, const std::string &op, std::vector<pb::ValueRef> operands,
         std::vector<pb::ValueRef> results) {
  pb::Launch &launch = *plan.add_launches();
  launch.set_op(op);
  for (const pb::ValueRef &ref : operands)
    *launch.add_operands() = ref;
  for (const pb::ValueRef &ref : results)
    *launch.add_results() = ref;
}

// The end of a decoder: hidden (slot 0) -> gather_last (slot 256) -> final
// norm (slot 512) -> lm_head GEMM (slot 768).
pb::Plan decoderTail() {
  pb::Plan plan;
  add(plan, "txk.gemm", {slot(1024), weight(0)}, {slot(0)});
  add(plan, "txk.gather_last", {slot(0)}, {slot(256)});
  add(plan, "txk.rms_norm", {slot(256), weight(1)}, {slot(512)});
  add(plan, "txk.gemm", {slot(512), weight(2)}, {slot(768)});
  return plan;
}

TEST(PlanFusionTest, AGatherWhoseInputOutlivesItsReadsIsAnIdentity) {
  EXPECT_EQ(identityGathers(decoderTail()), std::set<int>{1});
  EXPECT_EQ(fusableNorms(decoderTail()), std::set<int>{2});
}

TEST(PlanFusionTest, AGatherWhoseInputIsWrittenBeforeTheLastReadStays) {
  pb::Plan plan = decoderTail();
  // The norm writes into the gather's input, then the GEMM reads the gather.
  *plan.mutable_launches(2)->mutable_results(0) = slot(0);
  *plan.mutable_launches(3)->mutable_operands(0) = slot(256);
  EXPECT_TRUE(identityGathers(plan).empty());
  // Written by the very launch that reads it: also kept.
  pb::Plan in_place = decoderTail();
  *in_place.mutable_launches(2)->mutable_results(0) = slot(0);
  EXPECT_TRUE(identityGathers(in_place).empty());
}

TEST(PlanFusionTest, AGatherThatConvertsOrIsReadInPartStays) {
  pb::Plan converts = decoderTail();
  *converts.mutable_launches(1)->mutable_results(0) = slot(256, 256, 64, pb::DTYPE_F32);
  EXPECT_TRUE(identityGathers(converts).empty());
  pb::Plan partial = decoderTail();
  *partial.mutable_launches(2)->mutable_operands(0) = slot(384, 128);
  EXPECT_TRUE(identityGathers(partial).empty());
}

TEST(PlanFusionTest, ReadsAfterTheResultIsOverwrittenAreNotTheGathers) {
  pb::Plan plan = decoderTail();
  // After the norm, the gather's slot holds another value, and the input's
  // slot is free to be written: neither concerns the gather.
  add(plan, "txk.gemm", {slot(768), weight(3)}, {slot(256)});
  add(plan, "txk.gemm", {slot(256), weight(4)}, {slot(0)});
  plan.mutable_launches(3)->mutable_results(0)->mutable_arena()->set_offset(1280);
  EXPECT_EQ(identityGathers(plan), std::set<int>{1});
}

TEST(PlanFusionTest, ANormReadTwiceIsNotFused) {
  pb::Plan plan = decoderTail();
  add(plan, "txk.gemm", {slot(512), weight(3)}, {slot(1280)});
  EXPECT_TRUE(fusableNorms(plan).empty());
}

} // namespace
} // namespace txc::cuda
