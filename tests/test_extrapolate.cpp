// recall extrapolate: accuracy at multiples of the training length, the same as recall eval's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "inspect_test_util.h"
#include "recall/extrapolate.h"

namespace recall {
namespace {

TEST(Extrapolate, PointsPerCheckpointRuleAndLength) {
  ExtrapolateConfig config;
  config.checkpoints = {test::trained_small_mqar(), test::trained_small_mqar()};
  config.lengths = {1, 4};
  config.rules = {BetaRule::kNone, BetaRule::kQwen};
  set_threads(1);  // far faster than two threads on a busy machine
  const auto points = extrapolate(config);
  set_threads(0);
  SCOPED_TRACE(extrapolate_table(points));
  ASSERT_EQ(points.size(), 2u * 2u * 2u);
  EXPECT_EQ(points[0].seq_len, 16);
  EXPECT_EQ(points[1].seq_len, 64);
  EXPECT_EQ(points[2].rule, BetaRule::kQwen);
  EXPECT_EQ(points[0].trained, BetaRule::kNone);
  for (const auto& p : points) {
    if (p.multiple == 1) {
      EXPECT_GE(p.accuracy, 0.9);
    }
  }
  // at the training length qwen is the identity; the two checkpoints are the same
  EXPECT_DOUBLE_EQ(points[2].accuracy, points[0].accuracy);
  EXPECT_DOUBLE_EQ(points[4].accuracy, points[0].accuracy);
  EXPECT_DOUBLE_EQ(points[7].loss, points[3].loss);
}

TEST(Extrapolate, CliAgreesWithEvalAndRejectsBadFlags) {
  test::TempDir dir;
  const std::string ckpt = test::trained_small_mqar();
  const auto ok = test::run_cli({"--threads", "1", "extrapolate", "--checkpoints", ckpt,
                                 "--lengths", "1,2", "--rules", "yarn", "--json", dir / "x.json"},
                                dir);
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("2x"), std::string::npos) << ok.out;
  const auto j = nlohmann::json::parse(test::read_text(dir / "x.json"));
  ASSERT_EQ(j["points"].size(), 2u);
  const auto ev = test::run_cli({"--threads", "1", "eval", "--checkpoint", ckpt, "--seq-len", "32",
                                 "--rule", "yarn", "--batches", "2"},
                                dir);
  ASSERT_EQ(ev.code, 0) << ev.err;
  const auto e = nlohmann::json::parse(ev.out);
  EXPECT_EQ(j["points"][1]["seq_len"], 32);
  EXPECT_DOUBLE_EQ(j["points"][1]["accuracy"].get<double>(), e["accuracy"].get<double>());
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"extrapolate", "--checkpoints", ckpt, "--lengths", "65"}, "--lengths 65"},
      {{"extrapolate", "--checkpoints", ckpt, "--rules", "slow"}, "--rules"},
      {{"extrapolate", "--checkpoints", dir / "none"}, "none"},
  };
  for (const auto& [args, needle] : bad) {
    const auto r = test::run_cli(args, dir);
    EXPECT_EQ(r.code, 2) << needle;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace recall
