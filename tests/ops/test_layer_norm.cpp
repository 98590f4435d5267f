// The fused LayerNorm kernel against torch::layer_norm: values and gradients, with and without
// bias; and RMSNorm, the same kernel uncentred, against torch's ops.
#include <gtest/gtest.h>

#include "fast_gemm_test_util.h"
#include "recall/ops/kernels.h"
#include "recall/ops/layer_norm.h"

namespace recall {
namespace {

TEST(LayerNorm, FusedLayerNormMatchesTorchValuesAndGradients) {
  const int64_t calls = fast_calls(FastKernel::kLayerNorm);
  for (int64_t D : {128, 37}) {  // whole 16-float vectors, and a ragged tail
    for (bool with_bias : {true, false}) {
      torch::manual_seed(21);
      // parameters away from LayerNorm's (1, 0) init
      const auto weight0 = torch::rand({D}) + 0.5, bias0 = torch::randn({D});
      auto x = (torch::randn({3, 7, D}) * 3 + 1).requires_grad_(true);
      auto g = torch::randn({3, 7, D});
      std::array<std::vector<torch::Tensor>, 2> grads;
      std::array<torch::Tensor, 2> y;
      for (int fast = 0; fast < 2; ++fast) {
        auto xi = x.detach().clone().requires_grad_(true);
        auto weight = weight0.clone().requires_grad_(true);
        auto bias = with_bias ? bias0.clone().requires_grad_(true) : torch::Tensor();
        y[fast] = fast ? fast_layer_norm(xi, weight, bias, 1e-5)
                       : layer_norm_reference(xi, weight, bias, 1e-5);
        (y[fast] * g).sum().backward();
        grads[fast] = {xi.grad(), weight.grad()};
        if (with_bias) grads[fast].push_back(bias.grad());
      }
      const std::string where = "D " + std::to_string(D) + (with_bias ? " bias" : "");
      EXPECT_LT((y[0] - y[1]).abs().max().item<double>(), 1e-5) << where;
      for (size_t i = 0; i < grads[0].size(); ++i)
        EXPECT_LT((grads[0][i] - grads[1][i]).abs().max().item<double>(), 1e-4) << where << i;
    }
  }
  test::expect_fast_calls(FastKernel::kLayerNorm, calls, 4);
}

// RMSNorm, the same kernel with the mean taken as 0, against torch's ops under autograd: values and
// the gradients of x and weight, on rows with a mean far from 0 (where centring would show).
TEST(RmsNorm, FusedRmsNormMatchesTorchValuesAndGradients) {
  const int64_t calls = fast_calls(FastKernel::kRmsNorm);
  for (int64_t D : {64, 37}) {
    torch::manual_seed(22);
    const auto weight0 = torch::rand({D}) + 0.5;
    auto x = torch::randn({3, 7, D}) * 3 + 2;
    auto g = torch::randn({3, 7, D});
    std::array<std::vector<torch::Tensor>, 2> grads;
    std::array<torch::Tensor, 2> y;
    for (int fast = 0; fast < 2; ++fast) {
      auto xi = x.clone().requires_grad_(true);
      auto weight = weight0.clone().requires_grad_(true);
      y[fast] = fast ? rms_norm(xi, weight, 1e-6) : rms_norm_reference(xi, weight, 1e-6);
      (y[fast] * g).sum().backward();
      grads[fast] = {xi.grad(), weight.grad()};
    }
    EXPECT_LT((y[0] - y[1]).abs().max().item<double>(), 1e-5) << D;
    for (size_t i = 0; i < grads[0].size(); ++i)
      EXPECT_LT((grads[0][i] - grads[1][i]).abs().max().item<double>(), 1e-4) << D << " " << i;
  }
  test::expect_fast_calls(FastKernel::kRmsNorm, calls, 2);
}

TEST(LayerNorm, DoubleInputUsesTheReference) {
  const auto weight = torch::rand({8}, torch::kFloat64), bias = torch::randn({8}, torch::kFloat64);
  auto x = torch::randn({4, 8}, torch::kFloat64);
  const int64_t calls = fast_calls(FastKernel::kLayerNorm);
  EXPECT_TRUE(torch::allclose(fast_layer_norm(x, weight, bias, 1e-5),
                              layer_norm_reference(x, weight, bias, 1e-5), 0.0, 1e-12));
  EXPECT_EQ(fast_calls(FastKernel::kLayerNorm), calls);
}

}  // namespace
}  // namespace recall
