#include <gtest/gtest.h>

#include <cmath>

#include "recall/stores/beta_rule.h"

using recall::beta_for;
using recall::BetaRule;

TEST(BetaRule, ValuesAtSeveralPoints) {
  const double L = 1024, b0 = 8;
  EXPECT_DOUBLE_EQ(beta_for(BetaRule::kNone, 1 << 21, L, b0), 8.0);
  EXPECT_DOUBLE_EQ(beta_for(BetaRule::kSu, 1 << 20, L, b0), 16.0);  // ln 2^20 / ln 2^10 = 2
  EXPECT_DOUBLE_EQ(beta_for(BetaRule::kSu, 32, L, b0), 4.0);
  EXPECT_DOUBLE_EQ(beta_for(BetaRule::kQwen, 32, L, b0), 8.0);
  EXPECT_DOUBLE_EQ(beta_for(BetaRule::kQwen, 1 << 20, L, b0), 16.0);
  const double t = 0.1 * std::log(1024.0) + 1.0;  // M = 2^20 = 1024 L
  EXPECT_NEAR(beta_for(BetaRule::kYarn, 1 << 20, L, b0), 8.0 * t * t, 1e-12);
  EXPECT_NEAR(beta_for(BetaRule::kYarn, 1 << 20, L, b0),
              8.0 * 1.6931471805599454 * 1.6931471805599454, 1e-12);
}

TEST(BetaRule, SuEqualsQwenPastLAndYarnEqualsNoneBelowL) {
  for (double L : {64.0, 1024.0, 4096.0})
    for (double M = 1; M <= 1e7; M *= 3.7) {
      if (M >= L) {
        EXPECT_DOUBLE_EQ(beta_for(BetaRule::kSu, M, L, 8), beta_for(BetaRule::kQwen, M, L, 8));
      }
      if (M <= L) {
        EXPECT_DOUBLE_EQ(beta_for(BetaRule::kYarn, M, L, 8), 8.0);
      }
    }
}

TEST(BetaRule, TensorFormMatchesScalar) {
  auto M = torch::arange(1, 5000, 37, torch::kFloat64);
  for (BetaRule r : recall::all_beta_rules()) {
    auto b = beta_for(r, M, 256, 2.5);
    for (int64_t i = 0; i < M.size(0); ++i)
      EXPECT_NEAR(b[i].item<double>(), beta_for(r, M[i].item<double>(), 256, 2.5), 1e-12);
  }
}

TEST(BetaRule, NamesRoundTripAndBadInputNamesTheValue) {
  for (BetaRule r : recall::all_beta_rules())
    EXPECT_EQ(recall::beta_rule_from_string(recall::to_string(r)), r);
  try {
    recall::beta_rule_from_string("logn");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("logn"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("su"), std::string::npos);
  }
  EXPECT_THROW(beta_for(BetaRule::kSu, 0.5, 1024, 8), std::invalid_argument);
  EXPECT_THROW(beta_for(BetaRule::kSu, 10, 1, 8), std::invalid_argument);
  EXPECT_THROW(beta_for(BetaRule::kSu, 10, 1024, 0), std::invalid_argument);
}

TEST(BetaRule, SsmaxStartsAsSuAndLearns) {
  recall::SsmaxScale s(recall::SsmaxScaleOptions(3, 8.0, 1024));
  auto M = torch::tensor({1.0, 1024.0, 1048576.0});
  auto beta = s->forward(M);  // (3, 3)
  ASSERT_EQ(beta.sizes(), (std::vector<int64_t>{3, 3}));
  EXPECT_NEAR(beta[1][2].item<double>(), 16.0, 1e-4);
  beta.sum().backward();
  EXPECT_TRUE(s->scale.grad().defined());
  EXPECT_EQ(s->parameters().size(), 1u);
}
