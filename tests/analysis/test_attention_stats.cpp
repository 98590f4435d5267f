// The attention statistics of the sharpness experiment (recall/analysis/attention_stats.h): the
// logits' gradient against autograd, and uniform attention's entropy against its formula.
#include <gtest/gtest.h>

#include <cmath>

#include "recall/analysis/attention_stats.h"
#include "train_test_util.h"

namespace recall {
namespace {

TEST(AttentionStats, SoftmaxLogitGradMatchesAutograd) {
  torch::manual_seed(0);
  auto z = torch::randn({3, 5, 7}, torch::kFloat64).requires_grad_(true);
  auto r = torch::randn({3, 5, 7}, torch::kFloat64);
  auto w = torch::softmax(z, -1);
  auto g = torch::autograd::grad({(w * r).square().sum()}, {w}, {}, true)[0];
  auto dz = torch::autograd::grad({(w * r).square().sum()}, {z})[0];
  EXPECT_TRUE(torch::allclose(softmax_logit_grad(w.detach(), g), dz, 1e-12, 1e-12));
}

// With the query projections zeroed every query attends uniformly: the entropy is that of uniform
// weights, ln(t + 1) averaged over positions, and the logits still receive gradient.
TEST(AttentionStats, AttentionStatsOfUniformAttention) {
  auto tc = test::tiny_mqar();
  torch::manual_seed(0);
  Transformer model(tc.model);
  {
    torch::NoGradGuard no_grad;
    for (int64_t l = 0; l < tc.model.n_layers; ++l)
      model->block(l)->attn->qkv->weight.narrow(0, 0, tc.model.d_model).zero_();
  }
  auto task = make_task(tc);
  Rng rng(1);
  const Batch batch = task->sample(4, tc.model.seq_len, rng);
  const auto s = attention_stats(model, batch);
  double expect = 0;
  for (int64_t t = 1; t <= tc.model.seq_len; ++t) expect += std::log(static_cast<double>(t));
  expect /= static_cast<double>(tc.model.seq_len);
  EXPECT_NEAR(s.uniform_entropy, expect, 1e-9);
  EXPECT_NEAR(s.entropy, expect, 1e-5);
  EXPECT_GT(s.grad_norm, 0.0);
  EXPECT_TRUE(std::isfinite(s.grad_norm));
}

}  // namespace
}  // namespace recall
