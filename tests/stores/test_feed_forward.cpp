// Every feed-forward kind against the naive loops of model_reference.h.
#include <gtest/gtest.h>

#include "recall/stores/feed_forward.h"
#include "stores/model_reference.h"

namespace recall {
namespace {

void expect_matches_naive(FeedForwardOptions options, const std::string& what) {
  torch::manual_seed(2);
  FeedForward f(options);
  f->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : f->parameters()) p.normal_(0.0, 0.5);
  }
  auto x = torch::randn({2, 3, options.d_model()}, torch::kFloat64);  // (B, T, D)
  auto ref = testing::feed_forward_naive(*f, x.reshape({6, options.d_model()}));
  auto fast = f->forward(x);
  ASSERT_EQ(fast.sizes(), x.sizes()) << what;
  EXPECT_LT((fast.reshape({6, -1}) - ref).abs().max().item<double>(), 1e-12) << what;
  f->to(torch::kFloat32);
  auto fast32 = f->forward(x.to(torch::kFloat32)).to(torch::kFloat64);
  EXPECT_LT((fast32.reshape({6, -1}) - ref).abs().max().item<double>(), 1e-4) << what;
}

TEST(ModelFeedForward, MlpWithEveryActivationMatchesTheNaiveLoops) {
  for (auto act : {Activation::kRelu, Activation::kRelu2, Activation::kRelu3, Activation::kGelu})
    for (bool bias : {false, true})
      expect_matches_naive(FeedForwardOptions(8).activation(act).mult(2).bias(bias),
                           "mlp " + to_string(act));
}

TEST(ModelFeedForward, SwigluMatchesTheNaiveLoops) {
  expect_matches_naive(FeedForwardOptions(8).kind(FfnKind::kSwiglu).mult(3).bias(true), "swiglu");
}

TEST(ModelFeedForward, LearnedKvMatchesTheNaiveLoops) {
  expect_matches_naive(FeedForwardOptions(8).kind(FfnKind::kLearnedKv).slots(5).n_heads(2),
                       "learned_kv");
  expect_matches_naive(
      FeedForwardOptions(8).kind(FfnKind::kLearnedKv).slots(1).n_heads(1).bias(true),
      "learned_kv one slot");
}

TEST(ModelFeedForward, ParameterShapes) {
  FeedForward mlp(FeedForwardOptions(8).mult(4));
  EXPECT_EQ(mlp->w1->weight.sizes(), (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(mlp->w2->weight.sizes(), (std::vector<int64_t>{8, 32}));
  FeedForward kv(FeedForwardOptions(8).kind(FfnKind::kLearnedKv).slots(16).n_heads(4));
  EXPECT_EQ(kv->keys.sizes(), (std::vector<int64_t>{4, 16, 2}));
  EXPECT_EQ(kv->values.sizes(), (std::vector<int64_t>{4, 16, 2}));
  EXPECT_THROW(FeedForward(FeedForwardOptions(8).kind(FfnKind::kLearnedKv)), std::invalid_argument);
  EXPECT_THROW(FeedForward(FeedForwardOptions(8).kind(FfnKind::kNone)), std::invalid_argument);
}

}  // namespace
}  // namespace recall
