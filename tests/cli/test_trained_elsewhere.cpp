// A model trained elsewhere, probed end to end: python/train_mqar_hf.py trains a Qwen3-shaped model
// on mqar in plain PyTorch and transformers and saves it with save_pretrained; recall imports it,
// scores it as transformers did, finds its recalling heads, forecasts them and measures them at
// longer lengths, all through the binary as a user types it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "python_test_util.h"
#include "shell_test_util.h"
#include "train_test_util.h"

namespace fs = std::filesystem;

namespace {

using recall::test::read_text;
using recall::test::run_shell;
using recall::test::ShellRun;

nlohmann::json parse_or_null(const std::string& text) {
  return nlohmann::json::parse(text, nullptr, false);
}

}  // namespace

// The README's worked example at fewer steps (400 of dense recall, 200 of mqar; about 30 s on one
// thread): the script's own accuracy and recall's of the imported run agree within 0.01, both
// >= 0.9; inspect finds a recalling head in layer 1; forecast and extrapolate read the run.
TEST(TrainedElsewhere, Qwen3OnMqarImportedInspectedForecastAndExtrapolated) {
  const std::string python = recall::test::python_with("torch, transformers");
  if (python.empty())
    GTEST_SKIP() << "no Python with torch and transformers (scripts/torch2_venv.sh makes one; "
                    "RECALL_TORCH_VENV names it)";
  const fs::path dir = recall::test::fresh_dir("recall_trained_elsewhere");
  const std::string hf = (dir / "hf").string(), run = (dir / "run").string();
  const std::string train =
      python + " '" + recall::test::source_dir() + "/python/train_mqar_hf.py' --out '" + hf +
      "' --recall-steps 400 --steps 200 --threads 1 > '" + (dir / "train.log").string() + "' 2>&1";
  ASSERT_EQ(std::system(train.c_str()), 0) << read_text(dir / "train.log");
  const auto trained = parse_or_null(read_text(dir / "hf" / "train.json"));
  ASSERT_TRUE(trained.is_object()) << read_text(dir / "train.log");
  const double theirs = trained["accuracy"].get<double>();
  EXPECT_GE(theirs, 0.9) << read_text(dir / "train.log");

  const ShellRun i =
      run_shell("import --from " + hf + " --out " + run + " --config mqar-extrapolate");
  ASSERT_EQ(i.code, 0) << i.err;
  EXPECT_NE(i.err.find("Qwen3ForCausalLM"), std::string::npos) << i.err;
  const ShellRun e = run_shell("eval --checkpoint " + run + " --threads 1");
  ASSERT_EQ(e.code, 0) << e.err;
  const auto eval = parse_or_null(e.out);
  ASSERT_TRUE(eval.is_object()) << e.out;
  EXPECT_EQ(eval["task"], "mqar");
  EXPECT_EQ(eval["seq_len"], 32);
  const double ours = eval["accuracy"].get<double>();
  EXPECT_GE(ours, 0.9) << e.out;
  EXPECT_NEAR(ours, theirs, 0.01) << "recall's eval " << e.out << " against transformers' "
                                  << theirs;

  // the recalling heads: found by the mqar read offset, in layer 1 (layer 0 copies each value's
  // key into its position, which layer 1 matches)
  const ShellRun h = run_shell("inspect --checkpoint " + run +
                               " --lengths 1,2 --rules none --no-ablate --threads 1 --json -");
  ASSERT_EQ(h.code, 0) << h.err;
  const auto inspect = parse_or_null(h.out);
  ASSERT_TRUE(inspect.is_object() && inspect.contains("attention")) << h.out.substr(0, 500);
  int recalling = 0;
  for (const auto& a : inspect["attention"]) {
    if (a["seq_len"] != 32) continue;
    EXPECT_GE(a["accuracy"].get<double>(), 0.9);
    for (const auto& head : a["heads"])
      if (head["recalls"].get<bool>()) {
        ++recalling;
        EXPECT_EQ(head["layer"], 1);
        EXPECT_EQ(head["read_offset"], 1) << "a recalling head reads the value";
        EXPECT_LT(head["isr"]["median"].get<double>(), 1.0);
      }
  }
  EXPECT_GE(recalling, 1) << h.out.substr(0, 2000);

  const ShellRun f = run_shell("forecast --checkpoint " + run + " --target 64x --json -");
  ASSERT_EQ(f.code, 0) << f.err;
  const auto forecast = parse_or_null(f.out);
  ASSERT_TRUE(forecast.is_object()) << f.out;
  EXPECT_EQ(forecast["heads"].get<int>(), recalling);
  EXPECT_EQ(forecast["target"], 64);
  EXPECT_GE(forecast["forecasts"].size(), 4u) << "none, su, qwen and yarn";

  const ShellRun x = run_shell("extrapolate --checkpoints " + run +
                               " --rules none,su,qwen,yarn --lengths 1,4 --pairs grow --threads 1 "
                               "--json -");
  ASSERT_EQ(x.code, 0) << x.err;
  const auto points = parse_or_null(x.out);
  ASSERT_TRUE(points.is_object()) << x.out;
  ASSERT_EQ(points["points"].size(), 8u) << x.out;
  for (const auto& p : points["points"]) {
    const double acc = p["accuracy"].get<double>();
    EXPECT_TRUE(acc >= 0 && acc <= 1) << p;
    if (p["multiple"] == 1) {
      EXPECT_GE(acc, 0.9) << p;
    } else {
      EXPECT_EQ(p["pairs"], 32) << "the pairs grow with the length: " << p;
    }
  }
}
