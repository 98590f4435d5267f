// The step profile's op recording: which part each recorded op's name belongs to, exclusive time
// (an op's own, less the ops recorded inside it), and nothing recorded without a recorder.
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include "recall/core/step_profile.h"
#include "recall/core/torch.h"

namespace recall {
namespace {

TEST(StepProfile, OpNamesMapToTheirParts) {
  EXPECT_EQ(part_of_op("recall::gemm"), StepPart::kGemm);
  EXPECT_EQ(part_of_op("aten::mm"), StepPart::kGemm);
  EXPECT_EQ(part_of_op("AddmmBackward0"), StepPart::kGemm);
  EXPECT_EQ(part_of_op("recall::attention_backward"), StepPart::kAttention);
  EXPECT_EQ(part_of_op("aten::_softmax"), StepPart::kAttention);
  EXPECT_EQ(part_of_op("SoftmaxBackward0"), StepPart::kAttention);
  // the loss's log-softmax is not attention's softmax
  EXPECT_EQ(part_of_op("LogSoftmaxBackward0"), StepPart::kLoss);
  EXPECT_EQ(part_of_op("aten::_log_softmax"), StepPart::kLoss);
  EXPECT_EQ(part_of_op("aten::nll_loss_forward"), StepPart::kLoss);
  EXPECT_EQ(part_of_op("recall::layer_norm_backward"), StepPart::kNorms);
  EXPECT_EQ(part_of_op("NativeLayerNormBackward0"), StepPart::kNorms);
  EXPECT_EQ(part_of_op("recall::bias_gelu"), StepPart::kActivations);
  EXPECT_EQ(part_of_op("SiluBackward0"), StepPart::kActivations);
  EXPECT_EQ(part_of_op("aten::add"), StepPart::kElementwise);
  EXPECT_EQ(part_of_op("recall::round_bf16"), StepPart::kElementwise);
  EXPECT_EQ(to_string(StepPart::kGradSum), "grad_sum");
  EXPECT_EQ(to_string(StepPart::kWaits), "waits");
}

// A product inside a scope charged to attention: the product's time is the GEMM part's, the
// scope's own (the additions) attention's, and the parts add up to the span.
TEST(StepProfile, NestedOpsChargeTheirOwnTime) {
  const auto a = torch::randn({256, 256});
  const StepProfile quiet_before = thread_op_seconds();
  (void)torch::mm(a, a);
  StepProfile quiet = thread_op_seconds();
  quiet -= quiet_before;
  EXPECT_EQ(quiet.total(), 0.0) << "ops were recorded with no recorder alive";

  const StepProfile parts = record_parts([&] {
    RECORD_USER_SCOPE("recall::attention");
    auto s = a.clone();
    for (int i = 0; i < 20; ++i) s = torch::mm(s, a) * 1e-3;  // mm nested: gemm; mul: elementwise
  });
  EXPECT_GT(parts[StepPart::kGemm], 0.0);
  EXPECT_GT(parts[StepPart::kElementwise], 0.0);
  EXPECT_GE(parts[StepPart::kAttention], 0.0);
  EXPECT_GE(parts[StepPart::kUnrecorded], -1e-9);
  // 20 products of 256^3 multiply-adds outweigh the scope's clone and its 20 scalings
  EXPECT_GT(parts[StepPart::kGemm], parts[StepPart::kAttention]);
  for (StepPart p : {StepPart::kNorms, StepPart::kLoss, StepPart::kData, StepPart::kOptimizer})
    EXPECT_EQ(parts[p], 0.0) << to_string(p);
  EXPECT_FALSE(ops_recorded());
}

}  // namespace
}  // namespace recall
