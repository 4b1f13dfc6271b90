//===- PlanQueriesTest.cpp - What the backends ask of a plan and options --===//
#include "ArtifactTestUtil.h"
#include "txc/artifact/Artifact.h"

#include <gtest/gtest.h>

namespace txc::artifact {
namespace {

TEST(PlanQueriesTest, KvCacheDtypeFallsBackToActivationsThenF32) {
  pb::CompileOptions options;
  EXPECT_EQ(kvCacheDtype(options), DType::kF32);
  options.set_activation_dtype(pb::DTYPE_BF16);
  EXPECT_EQ(kvCacheDtype(options), DType::kBF16);
  options.set_kv_cache_dtype(pb::DTYPE_F16);
  EXPECT_EQ(kvCacheDtype(options), DType::kF16);
}

TEST(PlanQueriesTest, PlanWritesLogitsOnlyWithALogitsResult) {
  pb::Artifact message = testing::makeMessage();
  pb::Plan *plan = message.mutable_plans(0);
  EXPECT_FALSE(planWritesLogits(*plan)); // embedding and norm write the arena
  // A logits operand is not a logits result.
  plan->mutable_launches(1)->add_operands()->mutable_step_input()->set_kind(pb::STEP_INPUT_LOGITS);
  EXPECT_FALSE(planWritesLogits(*plan));
  plan->mutable_launches(1)->add_results()->mutable_step_input()->set_kind(pb::STEP_INPUT_LOGITS);
  EXPECT_TRUE(planWritesLogits(*plan));
}

} // namespace
} // namespace txc::artifact
