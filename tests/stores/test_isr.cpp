// The one ISR function against per-query loops, and its orthonormal-values form.
#include <gtest/gtest.h>

#include "recall/stores/isr.h"

namespace recall {
namespace {

TEST(Isr, MatchesPerQueryLoops) {
  torch::manual_seed(4);
  const int64_t Q = 5, M = 9, dv = 3;
  auto W = torch::randn({Q, M}, torch::kFloat64);
  auto V = torch::randn({M, dv}, torch::kFloat64);
  auto isr = self_recall_isr(W, V);
  ASSERT_EQ(isr.sizes(), (std::vector<int64_t>{Q}));
  for (int64_t j = 0; j < Q; ++j) {
    auto rest = torch::zeros({dv}, torch::kFloat64);
    for (int64_t i = 0; i < M; ++i)
      if (i != j) rest += W[j][i] * V[i];
    const double want = rest.norm().item<double>() / (W[j][j] * V[j]).norm().item<double>();
    // float64 sums of 9 terms: 1e-12 relative
    EXPECT_NEAR(isr[j].item<double>(), want, 1e-12 * want) << j;
  }
  // given norms replace |v_j|: unit ones give the ISR as if each v_j had unit norm
  auto unit = self_recall_isr(W, V, torch::ones({Q}, torch::kFloat64));
  auto scaled = isr * V.narrow(0, 0, Q).norm(2, 1);
  EXPECT_TRUE(torch::allclose(unit, scaled, 1e-12, 0));
}

TEST(Isr, OrthonormalValuesGiveTheWeightsAlone) {
  // an attention head's form: ISR_j = || W_j,-j ||_2 / W_jj
  torch::manual_seed(5);
  auto W = torch::softmax(torch::randn({4, 6}, torch::kFloat64) * 3, 1);
  auto isr = self_recall_isr(W, torch::eye(6, torch::kFloat64));
  auto diag = W.narrow(1, 0, 4).diagonal();
  auto rest = (W.square().sum(1) - diag.square()).sqrt();
  EXPECT_TRUE(torch::allclose(isr, rest / diag, 1e-12, 0));
  // no interference: 0 exactly
  EXPECT_EQ(
      self_recall_isr(torch::eye(3, torch::kFloat64) * 2, torch::randn({3, 2}, torch::kFloat64))
          .abs()
          .max()
          .item<double>(),
      0.0);
  EXPECT_THROW(self_recall_isr(torch::ones({4, 3}), torch::ones({3, 2})), std::invalid_argument);
}

}  // namespace
}  // namespace recall
