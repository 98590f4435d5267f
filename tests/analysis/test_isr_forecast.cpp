// The ISR forecast from the training length: at 1x under the trained rule it is the measured ISR;
// the memory count and the rules move it as the store's theory says.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/inspect_test_util.h"
#include "recall/analysis/inspect.h"
#include "recall/analysis/isr_forecast.h"
#include "recall/analysis/probe.h"
#include "recall/stores/attention.h"

namespace recall {
namespace {

TEST(IsrForecast, CrossingOfAFallingAccuracy) {
  // 0.5 halfway in log M between 4 and 16, linear in the accuracy; never, while it stays above
  EXPECT_NEAR(*crossing({1, 4, 16}, {1.0, 0.9, 0.1}, 0.5, false, false), 8.0, 1e-12);
  EXPECT_FALSE(crossing({1, 4}, {1.0, 0.9}, 0.5, false, false));
  EXPECT_FALSE(crossing({1, 4}, {0.4, 0.3}, 0.5, false, false));  // below from the start
}

TEST(IsrForecast, AtTheTrainingLengthItIsTheMeasuredIsr) {
  Restored r = restore(test::trained_small_mqar());
  const auto f = forecast_isr(r.model, r.config, {1, 2, 4}, {BetaRule::kNone, BetaRule::kSu}, 2);
  ASSERT_EQ(f.size(), 2u);
  ASSERT_GE(f[0].heads, 1);
  // inspect on the same prompts: the mean over the recalling heads of their median ISR
  auto task = make_task(r.config, {});
  const auto set = length_prompts(*task, r.config, r.config.model.seq_len, 2);
  double measured = 0;
  int64_t heads = 0;
  for (const auto& h : inspect_heads(r.model, set, r.config.task.mqar_pairs))
    if (h.recalls()) measured += h.isr.median, ++heads;
  ASSERT_EQ(heads, f[0].heads);
  EXPECT_NEAR(f[0].isr[0], measured / static_cast<double>(heads), 1e-9 * measured + 1e-12);
  EXPECT_EQ(f[0].pairs, (std::vector<int64_t>{2, 4, 7}));  // growing, up to the 7 keys
  // under none, more memories of the same kind can only add interference; su sharpens past L
  EXPECT_GT(f[0].isr[2], f[0].isr[0]);
  EXPECT_LT(f[1].isr[2], f[0].isr[2]);
  EXPECT_GT(f[0].beta, 0);
  EXPECT_GT(f[0].gap_median, 0);  // the read key is the nearest, by a margin
  EXPECT_THROW(forecast_isr(r.model, r.config, {2, 4}, {BetaRule::kNone}, 1),
               std::invalid_argument);
}

// The forecast under every rule against its closed form, on heads built by hand: unit q and k at
// scale beta_0, and every other key the same cosine margin g below the read key. A query at
// position t then has t gaps d_j = -beta_0 g (trained under none), and at m times the length
//   ISR_m = sqrt(t_m) exp(-beta_0 f(t_m + 1) g),   t_m = m (t + 1) - 1,
// with f the rule's growth of beta in M memories, written out here apart from beta_rule.cpp. The
// multipliers are a real attention layer's (logit_scale), so a rule the layer applies wrongly, a
// rule the forecast ignores, a wrong position or a wrong growth of the memories fails it.
TEST(IsrForecast, EveryRuleFollowsTheClosedFormOfUniformMarginHeads) {
  constexpr double kBeta0 = 8, kL = 32;
  const std::vector<int64_t> multiples = {1, 2, 4, 8, 16, 32, 64};
  std::vector<int64_t> pairs;
  for (int64_t m : multiples) pairs.push_back(4 * m);
  auto growth = [&](BetaRule rule, double M) {
    const double r = std::log(M) / std::log(kL);
    switch (rule) {
      case BetaRule::kNone:
        return 1.0;
      case BetaRule::kSu:
        return r;
      case BetaRule::kQwen:
        return std::max(1.0, r);
      case BetaRule::kYarn:
        return M > kL ? std::pow(0.1 * std::log(M / kL) + 1, 2) : 1.0;
      case BetaRule::kSsmax:
        return r;  // its learned scale at its start, beta_0 / ln L
    }
    return 0.0;
  };
  // two heads of one layer: head 0 reads at t = 20 with margin 0.3 (three queries), head 1 at
  // t = 31 with margin 0.5
  struct Head {
    int64_t head, t;
    double g;
  };
  const std::vector<Head> hand = {{0, 20, 0.3}, {0, 20, 0.3}, {0, 20, 0.3}, {1, 31, 0.5}};
  std::vector<ForecastQuery> queries;
  for (const Head& h : hand)
    queries.push_back({0, h.head, h.t, std::vector<double>(h.t, -kBeta0 * h.g)});
  const int64_t T = multiples.back() * static_cast<int64_t>(kL);
  auto scales = [&](BetaRule rule) {
    Attention attn(AttentionOptions(16, 2, static_cast<int64_t>(kL)).qk_norm(true).scale(kBeta0));
    attn->set_rule(rule);
    return std::vector<torch::Tensor>{attn->logit_scale(T, torch::kFloat64)};
  };
  const auto at_train = scales(BetaRule::kNone);
  for (BetaRule rule : all_beta_rules()) {
    SCOPED_TRACE(to_string(rule));
    const IsrForecast f =
        forecast_from_queries(queries, at_train, scales(rule), rule, multiples, pairs);
    EXPECT_EQ(f.rule, rule);
    EXPECT_EQ(f.heads, 2);
    EXPECT_EQ(f.pairs, pairs);
    std::vector<double> expected;
    for (int64_t m : multiples) {
      double sum = 0;
      for (const Head& h : {hand[0], hand[3]}) {
        const double t_m = static_cast<double>(m * (h.t + 1) - 1);
        sum += std::sqrt(t_m) * std::exp(-kBeta0 * growth(rule, t_m + 1) * h.g);
      }
      expected.push_back(sum / 2);
    }
    ASSERT_EQ(f.isr.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_NEAR(f.isr[i], expected[i], 1e-5 * expected[i]) << "at " << multiples[i] << "x";
    // where the mean ISR crosses 1: linear in (log pairs, log ISR) between the multiples around it
    std::optional<double> overflow;
    for (size_t i = 0; i + 1 < expected.size() && !overflow; ++i)
      if (expected[i] < 1 && expected[i + 1] >= 1) {
        const double a = std::log(expected[i]), b = std::log(expected[i + 1]);
        overflow =
            std::exp(std::log(static_cast<double>(pairs[i])) +
                     (0 - a) / (b - a) * std::log(static_cast<double>(pairs[i + 1]) / pairs[i]));
      }
    ASSERT_EQ(f.overflow_pairs.has_value(), overflow.has_value());
    if (overflow) EXPECT_NEAR(*f.overflow_pairs, *overflow, 1e-3 * *overflow);
  }
  // the rules differ where they should: none overflows within 64x, su and yarn do not
  EXPECT_TRUE(forecast_from_queries(queries, at_train, scales(BetaRule::kNone), BetaRule::kNone,
                                    multiples, pairs)
                  .overflow_pairs);
  for (BetaRule rule : {BetaRule::kSu, BetaRule::kYarn})
    EXPECT_FALSE(forecast_from_queries(queries, at_train, scales(rule), rule, multiples, pairs)
                     .overflow_pairs)
        << to_string(rule);
}

}  // namespace
}  // namespace recall
