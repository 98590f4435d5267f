// End-to-end runs small enough for the test budget: mqar learns, eval and sample read checkpoints.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "recall/train/presets.h"
#include "recall/train/trainer.h"
#include "train_test_util.h"

namespace recall {
namespace {

using test::TempDir;

TEST(TrainPresets, AllParseAndTheCompiledInCopiesMatchTheFiles) {
  for (const char* name : {"mqar-tiny", "facts-tiny", "text-tiny", "bench-gpt"}) {
    const std::string file = std::string(RECALL_SOURCE_DIR) + "/models/" + name + ".toml";
    const auto c = train_config_from_file(file);
    EXPECT_GE(c.trainer.steps, 1) << name;
    EXPECT_EQ(train_config_from_file(name).to_toml(), c.to_toml()) << name;
  }
  for (const auto& name : preset_names()) {
    const auto text = preset_toml(name);
    ASSERT_TRUE(text) << name;
    EXPECT_EQ(*text, test::read_text(std::string(RECALL_SOURCE_DIR) + "/models/" + name + ".toml"));
  }
  EXPECT_EQ(preset_names().size(), 4u);  // mqar-tiny, facts-tiny, text-tiny, bench-gpt
  EXPECT_FALSE(preset_toml("missing"));
}

// A smaller mqar than the preset: 4 pairs in 16 tokens, attention only (an MLP slows the forming of
// the induction circuit). The bar is looser than the preset's 0.99; the run takes a few seconds
// (speed is measured by `recall bench`, not asserted here).
TEST(TrainRuns, TinyMqarLearnsToRecall) {
  TempDir dir;
  const TrainConfig cfg = test::tiny_mqar(
      {"seq_len=16", "d_model=64", "n_heads=4", "ffn=none", "steps=400", "batch_size=64", "lr=3e-3",
       "min_lr=1e-3", "weight_decay=0", "warmup_steps=30", "eval_batches=8", "log_every=100"});
  const TrainResult r = [&] {
    TrainOptions o;
    o.out_dir = dir / "run";
    o.progress = false;
    return train(cfg, o);
  }();
  EXPECT_GE(r.eval.at("accuracy"), 0.9) << "loss " << r.eval.at("loss");
}

TEST(TrainRuns, EvalAndSampleFromTheCli) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 60; ++i) text += "the cat sat on the mat. ";
  test::write_text(dir / "corpus.txt", text);
  test::write_text(dir / "t.toml",
                   "task = \"text\"\ntext_file = \"corpus.txt\"\nseq_len = 32\n"
                   "d_model = 32\nn_layers = 1\nn_heads = 2\nsteps = 60\n"
                   "batch_size = 16\nlr = 1e-2\nwarmup_steps = 5\nlog_every = 20\n");
  const auto trained = test::run_cli(
      {"train", "--config", dir / "t.toml", "--out", dir / "run", "--threads", "1"}, dir);
  ASSERT_EQ(trained.code, 0) << trained.err;
  EXPECT_NE(trained.err.find("text_file = '" + (dir / "corpus.txt") + "'"), std::string::npos)
      << "the resolved config is printed on stderr, with the file relative to the config";
  EXPECT_EQ(nlohmann::json::parse(trained.out)["step"], 60) << "stdout carries the summary alone";
  EXPECT_NE(trained.err.find("tok/s"), std::string::npos);

  const auto eval =
      test::run_cli({"eval", "--checkpoint", dir / "run", "--seq-len", "64", "--rule", "su"}, dir);
  ASSERT_EQ(eval.code, 0) << eval.err;
  const auto j = nlohmann::json::parse(eval.out);
  EXPECT_EQ(j["seq_len"], 64);
  EXPECT_EQ(j["rule"], "su");
  EXPECT_LT(j["bits_per_char"].get<double>(), 2.5);  // a repeated sentence is easy

  const auto sample = test::run_cli({"sample", "--checkpoint", dir / "run", "--prompt", "the c",
                                     "--tokens", "20", "--temperature", "0"},
                                    dir);
  ASSERT_EQ(sample.code, 0) << sample.err;
  EXPECT_EQ(sample.out.rfind("the c", 0), 0u);
  EXPECT_EQ(sample.out.size(), 5u + 20u + 1u);  // prompt, 20 bytes, newline

  const auto bad = test::run_cli({"sample", "--checkpoint", dir / "run", "--prompt", "xyz"}, dir);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("not in the model's vocabulary"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace recall
