// FusedAdamW against torch::optim::AdamW on the same model and gradients.
#include <gtest/gtest.h>

#include "recall/models/model.h"
#include "recall/train/adamw.h"

namespace recall {
namespace {

TEST(ModelAdamW, MatchesTorchAdamWOverSeveralSteps) {
  // Shapes that span several of the parallel loop's chunks (16384 elements) and chunk edges.
  torch::manual_seed(9);
  std::vector<torch::Tensor> pa, pb;
  for (auto shape : {std::vector<int64_t>{3}, {200, 170}, {7, 5}, {40000}, {1}}) {
    pa.push_back(torch::randn(shape).requires_grad_(true));
    pb.push_back(pa.back().detach().clone().requires_grad_(true));
  }
  const double lr = 1e-2, wd = 0.1;
  torch::optim::AdamW reference(pa, torch::optim::AdamWOptions(lr).weight_decay(wd));
  FusedAdamW fused(pb, FusedAdamWOptions(lr).weight_decay(wd));
  for (int step = 0; step < 5; ++step) {
    for (size_t i = 0; i < pa.size(); ++i) {
      if (i == 2) continue;  // never has a gradient: must stay as it is
      auto g = torch::randn_like(pa[i]) * (step + 1);
      pa[i].mutable_grad() = g.clone();
      pb[i].mutable_grad() = g.clone();
    }
    reference.step();
    fused.step();
  }
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_LT((pa[i] - pb[i]).abs().max().item<double>(), 1e-6) << i;
  EXPECT_TRUE(torch::equal(pb[2], pa[2]));
}

TEST(ModelAdamW, ZeroGradSetsNoneAndBadOptionsAreRejected) {
  auto p = torch::ones({3}, torch::requires_grad());
  FusedAdamW opt({p}, FusedAdamWOptions(0.1));
  (p * 2).sum().backward();
  ASSERT_TRUE(p.grad().defined());
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
  EXPECT_THROW(FusedAdamW({p}, FusedAdamWOptions(-1.0)), std::invalid_argument);
  EXPECT_THROW(FusedAdamW({p}, FusedAdamWOptions(0.1).beta2(1.0)), std::invalid_argument);
  EXPECT_THROW(FusedAdamW({torch::ones({2}, torch::kFloat64)}, FusedAdamWOptions()),
               std::invalid_argument);
}

}  // namespace
}  // namespace recall
