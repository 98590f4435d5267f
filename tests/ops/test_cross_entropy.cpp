// The fused cross-entropy against torch's (reduction sum): the loss and the logits' gradient, at
// mqar-store's 8,449 classes and at a width with a ragged tail; a NaN logit gives a NaN loss; bad
// targets are refused in one line; double logits take the reference.
#include <gtest/gtest.h>

#include "fast_gemm_test_util.h"
#include "recall/ops/cross_entropy.h"
#include "recall/ops/kernels.h"

namespace recall {
namespace {

TEST(CrossEntropy, FusedMatchesTorchLossAndGradient) {
  const int64_t calls = fast_calls(FastKernel::kCrossEntropy);
  for (int64_t V : {8449, 37}) {
    torch::manual_seed(5);
    // logits of a trained head: a wide spread, one class well ahead in most rows
    const auto logits0 = torch::randn({300, V}) * 4;
    const auto targets = torch::randint(V, {300}, torch::kInt64);
    std::array<torch::Tensor, 2> loss, grad;
    for (int fast = 0; fast < 2; ++fast) {
      auto x = logits0.clone().requires_grad_(true);
      loss[fast] = fast ? cross_entropy_sum(x, targets) : cross_entropy_sum_reference(x, targets);
      (loss[fast] * 0.25).backward();  // the trainer scales by 1 / the scored rows
      grad[fast] = x.grad();
    }
    const double ref = loss[0].item<double>();
    // float32 rounding of 300 rows of about ln V + 8 nats
    EXPECT_NEAR(loss[1].item<double>(), ref, 1e-5 * std::abs(ref)) << V;
    EXPECT_LT((grad[0] - grad[1]).abs().max().item<double>(), 1e-6) << V;
    EXPECT_NEAR(grad[1].sum().item<double>(), 0.0, 1e-4) << V;  // each row: softmax - one-hot
  }
  test::expect_fast_calls(FastKernel::kCrossEntropy, calls, 2);
}

TEST(CrossEntropy, NanLogitGivesNanLoss) {
  auto x = torch::randn({4, 40});
  x[2][33] = std::numeric_limits<float>::quiet_NaN();
  const auto y = torch::tensor({1, 2, 3, 4}, torch::kInt64);
  EXPECT_TRUE(std::isnan(cross_entropy_sum(x, y).item<double>()));
  EXPECT_TRUE(std::isnan(cross_entropy_sum_reference(x, y).item<double>()));
}

TEST(CrossEntropy, RefusesTargetsOutsideTheClasses) {
  const auto x = torch::randn({2, 10});
  if (!fast_kernels(x.device())) GTEST_SKIP() << "the reference's own check (torch's) applies";
  try {
    cross_entropy_sum(x, torch::tensor({3, 10}, torch::kInt64));
    FAIL() << "a target of 10 among 10 classes was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("targets from 3 to 10"), std::string::npos) << e.what();
  }
}

TEST(CrossEntropy, DoubleLogitsUseTheReference) {
  const auto x = torch::randn({4, 8}, torch::kFloat64);
  const auto y = torch::tensor({0, 7, 3, 3}, torch::kInt64);
  const int64_t calls = fast_calls(FastKernel::kCrossEntropy);
  EXPECT_TRUE(
      torch::allclose(cross_entropy_sum(x, y), cross_entropy_sum_reference(x, y), 0.0, 1e-12));
  EXPECT_EQ(fast_calls(FastKernel::kCrossEntropy), calls);
}

}  // namespace
}  // namespace recall
