// The fused LayerNorm kernel against torch::layer_norm: values and gradients, with and without
// bias.
#include <gtest/gtest.h>

#include "fast_gemm_test_util.h"
#include "recall/core/kernels.h"
#include "recall/models/norm.h"

namespace recall {
namespace {

TEST(ModelNorm, FusedLayerNormMatchesTorchValuesAndGradients) {
  const int64_t calls = fast_calls(FastKernel::kLayerNorm);
  for (int64_t D : {128, 37}) {  // whole 16-float vectors, and a ragged tail
    for (bool bias : {true, false}) {
      torch::manual_seed(21);
      Norm norm(NormOptions(D).kind(NormKind::kLayerNorm).bias(bias));
      {
        torch::NoGradGuard no_grad;  // parameters away from their (1, 0) init
        norm->weight.uniform_(0.5, 1.5);
        if (bias) norm->bias.normal_();
      }
      auto x = (torch::randn({3, 7, D}) * 3 + 1).requires_grad_(true);
      auto g = torch::randn({3, 7, D});
      std::array<std::vector<torch::Tensor>, 2> grads;
      std::array<torch::Tensor, 2> y;
      for (int fast = 0; fast < 2; ++fast) {
        for (auto& p : norm->parameters()) p.mutable_grad().reset();
        auto xi = x.detach().clone().requires_grad_(true);
        y[fast] = fast ? norm(xi) : norm->layer_norm_reference(xi);
        (y[fast] * g).sum().backward();
        grads[fast] = {xi.grad()};
        for (auto& p : norm->parameters()) grads[fast].push_back(p.grad());
      }
      const std::string where = "D " + std::to_string(D) + (bias ? " bias" : "");
      EXPECT_LT((y[0] - y[1]).abs().max().item<double>(), 1e-5) << where;
      for (size_t i = 0; i < grads[0].size(); ++i)
        EXPECT_LT((grads[0][i] - grads[1][i]).abs().max().item<double>(), 1e-4) << where << i;
    }
  }
  test::expect_fast_calls(FastKernel::kLayerNorm, calls, 4);
}

TEST(ModelNorm, DoubleInputUsesTheReference) {
  Norm norm(NormOptions(8).kind(NormKind::kLayerNorm).bias(true));
  norm->to(torch::kFloat64);
  auto x = torch::randn({4, 8}, torch::kFloat64);
  EXPECT_TRUE(torch::allclose(norm(x), norm->layer_norm_reference(x), 0.0, 1e-12));
}

}  // namespace
}  // namespace recall
