// recall extrapolate: accuracy at multiples of the training length, the same as recall eval's.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis/inspect_test_util.h"
#include "recall/analysis/extrapolate.h"
#include "sanitizer_test_util.h"

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

// A run trained under none also read under qwen: the same model, the identity up to L, sharper
// past it.
TEST(Extrapolate, NoneRunsAreAlsoReadUnderNoneAlso) {
  ExtrapolateConfig config;
  config.checkpoints = {test::trained_small_mqar()};
  config.lengths = {1, 4};
  config.none_also = {BetaRule::kQwen};
  set_threads(1);
  const auto points = extrapolate(config);
  set_threads(0);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].rule, BetaRule::kNone);
  EXPECT_EQ(points[2].rule, BetaRule::kQwen);
  EXPECT_EQ(points[2].trained, BetaRule::kNone);
  EXPECT_DOUBLE_EQ(points[2].loss, points[0].loss);  // 1x: qwen's factor is 1
  EXPECT_NE(points[3].loss, points[1].loss);         // 4x: past L it is not
}

// What a later step reads back (the report's heads read mqar's points) is what was written, every
// field; text that is not such JSON is refused naming its file. A suite of its own, so that the
// sanitized pass (which leaves out Extrapolate's model runs) reads it too.
TEST(ExtrapolateJson, ReadsBackItsPointsAndRefusesOtherText) {
  const std::vector<ExtrapolatePoint> points = {
      {"runs/a/none-seed0", BetaRule::kNone, BetaRule::kYarn, 4, 128, 32, 0.8125, 0.0123456789},
      {"runs/a/su", BetaRule::kSu, BetaRule::log(0.25), 1, 32, 8, 1.0, 1e-7}};
  const auto back = read_extrapolate_json(extrapolate_json(points), "x.json");
  ASSERT_EQ(back.size(), points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(back[i].checkpoint, points[i].checkpoint);
    EXPECT_EQ(back[i].trained, points[i].trained);
    EXPECT_EQ(back[i].rule, points[i].rule);
    EXPECT_EQ(back[i].multiple, points[i].multiple);
    EXPECT_EQ(back[i].seq_len, points[i].seq_len);
    EXPECT_EQ(back[i].pairs, points[i].pairs);
    EXPECT_EQ(back[i].accuracy, points[i].accuracy);
    EXPECT_EQ(back[i].loss, points[i].loss);
  }
  for (const char* bad : {"{}", "{\"points\": [{\"checkpoint\": 3}]}", "[1, 2]"}) {
    try {
      read_extrapolate_json(bad, "x.json");
      ADD_FAILURE() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("x.json"), std::string::npos) << e.what();
    }
  }
}

// A run that learned is read by its own rule at 1x: a none run's 1x under another rule, its long
// lengths, and runs below the bar do not count.
TEST(Extrapolate, TheFirstLearnedRunOfARule) {
  const std::vector<ExtrapolatePoint> points = {
      {"a", BetaRule::kNone, BetaRule::kNone, 1, 32, 8, 0.5, 0},  // did not learn
      {"a", BetaRule::kNone, BetaRule::kSu, 1, 32, 8, 1.0, 0},    // another rule's reading
      {"a", BetaRule::kNone, BetaRule::kNone, 4, 128, 32, 1.0, 0},
      {"b", BetaRule::kSu, BetaRule::kSu, 1, 32, 8, 1.0, 0},
      {"c", BetaRule::kNone, BetaRule::kNone, 1, 32, 8, 0.95, 0},
      {"d", BetaRule::kNone, BetaRule::kNone, 1, 32, 8, 1.0, 0}};
  EXPECT_EQ(first_learned_run(points, BetaRule::kNone), "c");
  EXPECT_EQ(first_learned_run(points, BetaRule::kSu), "b");
  EXPECT_EQ(first_learned_run(points, BetaRule::kNone, 0.99), "d");
  EXPECT_EQ(first_learned_run(points, BetaRule::kYarn), "");
}

TEST(Extrapolate, PairsGrowWithTheLengthUpToTheKeys) {
  // vocab 16: 7 keys; trained with 2 pairs in 16 tokens
  ExtrapolateConfig config;
  config.checkpoints = {test::trained_small_mqar()};
  config.lengths = {1, 2, 4, 8};
  config.pairs = PairsAtLength::kGrow;
  set_threads(1);
  const auto grow = extrapolate(config);
  config.pairs = PairsAtLength::kFixed;
  const auto fixed = extrapolate(config);
  set_threads(0);
  ASSERT_EQ(grow.size(), 4u);
  const int64_t want[] = {2, 4, 7, 7};
  for (size_t i = 0; i < grow.size(); ++i) {
    EXPECT_EQ(grow[i].pairs, want[i]) << grow[i].multiple;
    EXPECT_EQ(fixed[i].pairs, 2);
  }
  // the same prompts at the training length; more pairs score more queries further on
  EXPECT_DOUBLE_EQ(grow[0].accuracy, fixed[0].accuracy);
  EXPECT_NE(grow[2].loss, fixed[2].loss);
  EXPECT_THROW(pairs_at_length_from_string("more"), std::invalid_argument);
}

TEST(Extrapolate, CliAgreesWithEvalAndRejectsBadFlags) {
  test::TempDir dir;
  const std::string ckpt = test::trained_small_mqar();
  const auto ok =
      test::run_cli({"--threads", "1", "extrapolate", "--checkpoints", ckpt, "--lengths", "1,2,128",
                     "--rules", "yarn", "--json", dir / "x.json"},
                    dir);
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("2x"), std::string::npos) << ok.out;
  const auto j = nlohmann::json::parse(test::read_text(dir / "x.json"));
  ASSERT_EQ(j["points"].size(), 3u);  // 128x: past any constant cap, within the estimate
  const auto ev = test::run_cli({"--threads", "1", "eval", "--checkpoint", ckpt, "--seq-len", "32",
                                 "--rule", "yarn", "--batches", "2"},
                                dir);
  ASSERT_EQ(ev.code, 0) << ev.err;
  const auto e = nlohmann::json::parse(ev.out);
  EXPECT_EQ(j["points"][1]["seq_len"], 32);
  EXPECT_DOUBLE_EQ(j["points"][1]["accuracy"].get<double>(), e["accuracy"].get<double>());
  test::write_text(dir / "tiny.toml", test::tiny_mqar_toml());
  const test::UsageCases bad = {
      {{"extrapolate", "--checkpoints", ckpt, "--lengths", "65536,65537"}, "--lengths 65537"},
      // the RAM estimate, not a constant, bounds the lengths: an explicit limit, so that the
      // case holds on a machine of any size
      {{"extrapolate", "--checkpoints", ckpt, "--lengths", "1,65536", "--max-memory", "64M"},
       "--lengths 65536 (1048576 tokens) needs an estimated"},
      // the flag, not the free RAM, refuses it (both print the estimate)
      {{"extrapolate", "--checkpoints", ckpt, "--lengths", "1,65536", "--max-memory", "64M"},
       "more than --max-memory 64.0 MiB;"},
      {{"extrapolate", "--config", dir / "tiny.toml", "--out", dir / "r", "--lengths", "65536",
        "--max-memory", "64M"},
       "more than --max-memory 64.0 MiB;"},
      {{"extrapolate", "--checkpoints", ckpt, "--rules", "slow"}, "--rules"},
      {{"extrapolate", "--checkpoints", ckpt, "--pairs", "more"}, "--pairs 'more'"},
      {{"extrapolate", "--checkpoints", dir / "none"}, "none"},
      {{"extrapolate"}, "--checkpoints"},
      {{"extrapolate", "--checkpoints", ckpt, "--config", dir / "tiny.toml", "--out", dir / "r"},
       "--config"},
      {{"extrapolate", "--config", dir / "tiny.toml"}, "--out"},
      {{"extrapolate", "--config", dir / "tiny.toml", "--out", dir / "r", "--seeds", "0"},
       "--seeds 0"},
      {{"extrapolate", "--config", dir / "tiny.toml", "--out", dir / "r", "--set", "colour=1"},
       "colour"},
      {{"extrapolate", "--checkpoints", ckpt, "--plot", dir / "x.jpg"}, "--plot"},
  };
  test::expect_usage_errors(bad, dir);
  EXPECT_FALSE(std::filesystem::exists(dir / "r"));
}

}  // namespace
}  // namespace recall
