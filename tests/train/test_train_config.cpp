#include <gtest/gtest.h>

#include "recall/core/error.h"
#include "recall/train/train_config.h"
#include "train_test_util.h"

namespace recall {
namespace {

using test::TempDir;

std::string error_of(const std::string& toml, const std::vector<std::string>& sets = {}) {
  try {
    train_config_from_toml(toml, "cfg.toml", sets);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(TrainConfig, ParsesTypedKeysAndPrintsThemBack) {
  const TrainConfig c = test::tiny_mqar({"lr=0.002", "task=mqar", "attn_rule=su"});
  EXPECT_EQ(c.model.d_model, 32);
  EXPECT_EQ(c.task.mqar_pairs, 4);
  EXPECT_DOUBLE_EQ(c.trainer.lr, 0.002);
  EXPECT_EQ(c.model.attn_rule, BetaRule::kSu);
  const TrainConfig back = train_config_from_toml(c.to_toml(), "printed");
  EXPECT_EQ(config_items(back), config_items(c));
}

TEST(TrainConfig, UnknownKeyIsNamed) {
  const auto msg = error_of("d_modle = 64\n");
  EXPECT_NE(msg.find("unknown key 'd_modle'"), std::string::npos) << msg;
  EXPECT_NE(error_of("", {"nope=1"}).find("unknown key 'nope'"), std::string::npos);
}

TEST(TrainConfig, WrongTypeNamesKeyValueAndType) {
  const auto msg = error_of("batch_size = \"wide\"\n");
  EXPECT_NE(msg.find("batch_size = 'wide': must be an integer in [1, 65536]"), std::string::npos)
      << msg;
  EXPECT_NE(error_of("d_model = \"wide\"\n").find("d_model"), std::string::npos);
  EXPECT_NE(error_of("", {"tied_head=3"}).find("tied_head"), std::string::npos);
  EXPECT_NE(error_of("lr = 1e-3\n", {"steps=1.5"}).find("steps = 1.5"), std::string::npos);
}

TEST(TrainConfig, OutOfRangeNamesAcceptedRange) {
  EXPECT_NE(error_of("lr = -1.0\n").find("lr = -1.0: must be a finite number > 0"),
            std::string::npos);
  EXPECT_NE(error_of("n_layers = 0\n").find("n_layers = 0: must be an integer in [1, 1024]"),
            std::string::npos);
  EXPECT_NE(
      error_of("d_model = 1000000\n").find("d_model = 1000000: must be an integer in [1, 65536]"),
      std::string::npos);
  EXPECT_NE(error_of("eval_batches = 0\n")
                .find("eval_batches = 0: must be an integer in [1, "
                      "65536]"),
            std::string::npos);
  EXPECT_NE(error_of("pos = \"alibi\"\n").find("one of rope, learned, none"), std::string::npos);
  EXPECT_NE(error_of("", {"beta2=1.0"}).find("beta2 = 1.0"), std::string::npos);
}

TEST(TrainConfig, CrossKeyChecks) {
  EXPECT_NE(error_of(test::tiny_mqar_toml(), {"min_lr=1.0"}).find("min_lr = 1"), std::string::npos);
  EXPECT_NE(error_of(test::tiny_mqar_toml(), {"mqar_pairs=9"}).find("seq_len = 32"),
            std::string::npos);
  const auto facts = error_of("task = \"facts\"\nfacts_n = 5000\nfacts_subjects = 10\n");
  EXPECT_NE(facts.find("facts_n = 5000"), std::string::npos) << facts;
  // facts fixes the vocabulary: S + R + O
  const auto f = train_config_from_toml(
      "task = \"facts\"\nfacts_subjects = 10\nfacts_relations = "
      "3\nfacts_objects = 7\nfacts_n = 20\n",
      "f");
  EXPECT_EQ(f.model.vocab_size, 20);
}

TEST(TrainConfig, TomlSyntaxErrorHasLine) {
  const auto msg = error_of("d_model = 64\nlr = = 3\n");
  EXPECT_EQ(msg.rfind("cfg.toml:2:", 0), 0u) << msg;
}

// Through the real binary: exit 2, a one-line message naming the key, and nothing written.
TEST(TrainConfigCli, BadConfigsExitTwoWithoutOutput) {
  TempDir dir;
  const std::string base = test::tiny_mqar_toml();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {base + "colour = 3\n", "unknown key 'colour'"},
      {base + "eval_every = \"often\"\n", "eval_every = 'often': must be an integer"},
      {base + "checkpoint_every = -4\n", "checkpoint_every = -4: must be an integer in [0, "},
      {"d_model = 30\nn_heads = 4\n", "d_model"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string cfg = dir / ("c" + std::to_string(i) + ".toml");
    test::write_text(cfg, cases[i].first);
    const std::string out = dir / ("run" + std::to_string(i));
    const auto r = test::run_cli({"train", "--config", cfg, "--out", out}, dir);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(cases[i].second), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << "case " << i;
  }
  // --set goes through the same checks
  const std::string cfg = dir / "ok.toml";
  test::write_text(cfg, base);
  const auto r =
      test::run_cli({"train", "--config", cfg, "--set", "lr=fast", "--out", dir / "r"}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("lr = 'fast': must be a finite number > 0"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "r"));
}

TEST(TrainConfigCli, UnwritableOutIsReportedFirst) {
  TempDir dir;
  const std::string cfg = dir / "ok.toml";
  test::write_text(cfg, test::tiny_mqar_toml());
  test::write_text(dir / "file", "x");
  const auto r = test::run_cli({"train", "--config", cfg, "--out", dir / "file/run"}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace recall
