// The vectorised row kernels against std::exp and torch's softmax, including ragged row lengths.
#include <gtest/gtest.h>

#include "../models/row_math.h"

namespace recall {
namespace {

TEST(ModelRowMath, ExpMatchesStdExpOnTheSoftmaxRange) {
  double worst = 0.0;
  for (int i = 0; i <= 100000; ++i) {
    const float x = -87.0f * static_cast<float>(i) / 100000.0f;
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(row_math::exp_nonpositive(x) - want) / want);
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_LT(row_math::exp_nonpositive(-1000.0f), 1e-37f);  // clamped at e^-87, still tiny
  EXPECT_GE(row_math::exp_nonpositive(-1000.0f), 0.0f);
}

TEST(ModelRowMath, CausalSoftmaxRowsMatchesMaskedSoftmax) {
  torch::manual_seed(3);
  for (auto [rows, w, first] :
       {std::array<int64_t, 3>{5, 37, 20}, {64, 256, 192}, {3, 3, 0}, {4, 40, 36}, {2, 17, 100}}) {
    auto logits = torch::randn({rows, w}) * 30;  // wide range: exercises the max shift and clamp
    auto mask = torch::ones({rows, w}, torch::kBool).triu(first + 1);  // hidden keys
    auto want = torch::softmax(logits.masked_fill(mask, -INFINITY), 1);
    auto got = logits.clone();
    row_math::causal_softmax_rows(got.data_ptr<float>(), rows, w, first);
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-6) << rows << "x" << w << " " << first;
    EXPECT_EQ(got.masked_select(mask).abs().sum().item<float>(), 0.0f);
  }
}

TEST(ModelRowMath, SoftmaxBackwardRowsMatchesAutograd) {
  torch::manual_seed(4);
  for (auto [rows, w] : {std::pair<int64_t, int64_t>{7, 45}, {64, 128}, {1, 1}}) {
    auto logits = torch::randn({rows, w}, torch::requires_grad());
    auto p = torch::softmax(logits, 1);
    auto g = torch::randn({rows, w});
    (p * g).sum().backward();
    auto got = g.clone();
    row_math::softmax_backward_rows(p.detach().contiguous().data_ptr<float>(),
                                    got.data_ptr<float>(), rows, w);
    EXPECT_LT((got - logits.grad()).abs().max().item<double>(), 1e-5);
  }
}

}  // namespace
}  // namespace recall
