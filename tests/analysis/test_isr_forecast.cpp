// The ISR forecast from the training length: at 1x under the trained rule it is the measured ISR;
// the memory count and the rules move it as the store's theory says.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/inspect_test_util.h"
#include "recall/analysis/inspect.h"
#include "recall/analysis/isr_forecast.h"

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

}  // namespace
}  // namespace recall
