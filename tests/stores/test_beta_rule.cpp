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

// log:c grows beta_0 by c ln(M / L) past L and equals none up to L; c = 1 / ln L is qwen.
TEST(BetaRule, LogWithItsCoefficient) {
  const double L = 1024, b0 = 8;
  const BetaRule r = recall::BetaRule::log(0.4);
  EXPECT_DOUBLE_EQ(beta_for(r, 512, L, b0), 8.0);
  EXPECT_DOUBLE_EQ(beta_for(r, L, L, b0), 8.0);
  EXPECT_NEAR(beta_for(r, 64 * L, L, b0), 8.0 * (1 + 0.4 * std::log(64.0)), 1e-12);
  const BetaRule qwen_like = recall::BetaRule::log(1 / std::log(L));
  for (double M = 1; M <= 1e7; M *= 3.7)
    EXPECT_NEAR(beta_for(qwen_like, M, L, b0), beta_for(BetaRule::kQwen, M, L, b0), 1e-12) << M;
  EXPECT_DOUBLE_EQ(beta_for(recall::BetaRule::log(0), 1e6, L, b0), 8.0);
  // written and read back with the coefficient's shortest exact digits
  EXPECT_EQ(recall::to_string(r), "log:0.4");
  EXPECT_EQ(recall::beta_rule_from_string("log:0.4"), r);
  EXPECT_EQ(recall::beta_rule_from_string(recall::to_string(qwen_like)), qwen_like);
  EXPECT_NE(recall::beta_rule_from_string("log:0.4"), recall::beta_rule_from_string("log:0.5"));
  // a coefficient that is missing, not a number, negative or infinite, or one given to a rule
  // that takes none: refused, naming the value and the accepted forms
  for (const char* bad :
       {"log", "log:", "log:x", "log:-1", "log:inf", "log:nan", "log:0.4x", "su:0.4", "none:"}) {
    try {
      recall::beta_rule_from_string(bad);
      ADD_FAILURE() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("log:C"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(recall::BetaRule::log(-0.1), std::invalid_argument);
}

// Every row of the table: its name round-trips, the tensor form is the scalar form, and a rule
// that equals none up to the training length does.
TEST(BetaRule, EveryRowOfTheTable) {
  auto M = torch::arange(1, 3000, 7, torch::kFloat64);
  for (const recall::BetaRuleRow& row : recall::beta_rules()) {
    SCOPED_TRACE(row.name);
    const BetaRule r{row.kind, row.takes_c ? 0.25 : 0.0};
    EXPECT_EQ(&recall::row_of(r), &row);
    EXPECT_EQ(recall::beta_rule_from_string(recall::to_string(r)), r);
    const auto b = beta_for(r, M, 256, 2.5);
    for (int64_t i = 0; i < M.size(0); ++i) {
      const double m = M[i].item<double>();
      EXPECT_NEAR(b[i].item<double>(), beta_for(r, m, 256, 2.5), 1e-12);
      if (row.none_up_to_training_length && m <= 256) {
        EXPECT_EQ(b[i].item<double>(), 2.5);
      }
    }
  }
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
