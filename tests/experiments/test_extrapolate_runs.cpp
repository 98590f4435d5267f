// recall extrapolate --config: one run trained per rule and seed, each scored under its own rule
// at multiples of its training length (recall/experiments/extrapolate_runs.h).
#include <gtest/gtest.h>

#include <filesystem>

#include "recall/core/threads.h"
#include "recall/experiments/extrapolate_runs.h"
#include "recall/train/checkpoint.h"
#include "sanitizer_test_util.h"
#include "train_test_util.h"

namespace recall {
namespace {

// The preset as shipped, seed 0 on one thread: mqar-tiny recalls by content, without positions,
// within a third of its steps, and keeps recalling at 4x its length with 4x the pairs. A fixed
// seed, so the test is exact and can fail: the preset must learn, not one seed in several.
TEST(ExtrapolateRuns, MqarTinyLearnsAndKeepsRecallingAtLength) {
  RECALL_SKIP_WHEN_SANITIZED("300 training steps until mqar-tiny recalls");
  test::TempDir dir;
  ExtrapolateRuns runs;
  runs.run.progress = false;
  ExtrapolateConfig config;
  runs.train_config = "mqar-tiny";
  runs.sets = {"steps=300"};
  runs.out_dir = dir / "runs";
  runs.rules = {BetaRule::kNone};
  config.lengths = {1, 4};
  config.pairs = PairsAtLength::kGrow;
  set_threads(1);
  const auto points = train_and_extrapolate(runs, config);
  set_threads(0);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_GE(points[0].accuracy, 0.99);
  EXPECT_EQ(points[1].pairs, 15);  // 4 x 8 capped at the vocabulary's 15 keys
  EXPECT_GE(points[1].accuracy, 0.95);
}

// --config trains one run per rule and seed under its own rule, then reuses the finished runs.
TEST(ExtrapolateRuns, TrainsOneRunPerRuleAndSeedThenReusesThem) {
  test::TempDir dir;
  test::write_text(dir / "tiny.toml", test::tiny_mqar_toml());
  ExtrapolateRuns runs;
  runs.run.progress = false;
  ExtrapolateConfig config;
  runs.train_config = dir / "tiny.toml";
  runs.sets = {"steps=4"};
  runs.out_dir = dir / "runs";
  runs.rules = {BetaRule::kNone, BetaRule::kSsmax};
  runs.seeds = 2;
  config.lengths = {1, 2};
  config.batches = 1;
  set_threads(1);
  const auto points = train_and_extrapolate(runs, config);
  set_threads(0);
  ASSERT_EQ(points.size(), 2u * 2u * 2u);  // rules x seeds x lengths
  EXPECT_EQ(points[0].checkpoint, dir / "runs/none-seed0");
  EXPECT_EQ(points[2].checkpoint, dir / "runs/none-seed1");
  EXPECT_EQ(points[4].checkpoint, dir / "runs/ssmax-seed0");
  for (const auto& p : points) EXPECT_EQ(p.rule, p.trained);
  EXPECT_EQ(points[4].trained, BetaRule::kSsmax);
  EXPECT_EQ(points[1].seq_len, 64);
  const Restored r = restore(dir / "runs/none-seed1");
  EXPECT_EQ(r.step, 4);
  EXPECT_EQ(r.config.trainer.seed, 8);  // the config's seed 7, plus 1
  // a second call finds the finished runs and evaluates the same models
  const auto again = train_and_extrapolate(runs, config);
  ASSERT_EQ(again.size(), points.size());
  for (size_t i = 0; i < points.size(); ++i) EXPECT_DOUBLE_EQ(again[i].loss, points[i].loss);
  const auto curves = extrapolate_curves(points);
  ASSERT_EQ(curves.size(), 2u);
  EXPECT_EQ(curves[1].rule, BetaRule::kSsmax);
  EXPECT_EQ(curves[0].runs, 2);
  EXPECT_DOUBLE_EQ(curves[0].accuracy[1], (points[1].accuracy + points[3].accuracy) / 2);
  EXPECT_LE(curves[0].low[1], curves[0].accuracy[1]);
  EXPECT_GE(curves[0].high[1], curves[0].accuracy[1]);
  write_extrapolate_plot(points, dir / "x.png");
  EXPECT_EQ(test::read_text(dir / "x.png").substr(1, 3), "PNG");
}

}  // namespace
}  // namespace recall
