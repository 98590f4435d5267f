// End-to-end runs small enough for the test budget: mqar learns, eval and sample read checkpoints.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "recall/core/error.h"
#include "recall/models/model_config.h"
#include "recall/train/recipes.h"
#include "recall/train/trainer.h"
#include "test_paths.h"
#include "train_test_util.h"

namespace recall {
namespace {

using test::TempDir;

TEST(TrainRecipes, AllParseAndTheCompiledInCopiesMatchTheFiles) {
  const std::string src = recall::test::source_dir();
  for (const char* name : {"mqar-tiny", "mqar-extrapolate", "mqar-store", "facts-tiny", "text-tiny",
                           "text-small", "bench-gpt"}) {
    const std::string file = src + "/train/" + name + ".toml";
    const auto c = train_config_from_file(file);
    EXPECT_GE(c.trainer.steps, 1) << name;
    EXPECT_EQ(train_config_from_file(name).to_toml(), c.to_toml()) << name;
  }
  for (const auto& name : train_recipe_names()) {
    const auto text = train_recipe_toml(name);
    ASSERT_TRUE(text) << name;
    EXPECT_EQ(*text, test::read_text(src + "/train/" + name + ".toml"));
  }
  EXPECT_EQ(train_recipe_names().size(), 7u);
  EXPECT_FALSE(train_recipe_toml("missing"));
}

// A recipe's model keys come from its shape, under the recipe's own and --set's; the resolved
// config is flat and reads back the same without the shape.
TEST(TrainRecipes, ShapeKeysSitUnderTheRecipesAndTheOverrides) {
  const TrainConfig tiny = train_config_from_file("mqar-tiny");
  const TrainConfig extra = train_config_from_file("mqar-extrapolate");
  const ModelConfig shape = model_config_from_toml(read_model_shape("tiny-attn"));
  EXPECT_EQ(model_config_items(tiny.model), model_config_items(shape));
  EXPECT_EQ(extra.model.vocab_size, 512);  // the recipe's own
  EXPECT_EQ(extra.model.attn_conv, shape.attn_conv);
  const TrainConfig set = train_config_from_file("mqar-tiny", {"attn_conv=3", "model=gpt-tiny"});
  EXPECT_EQ(set.model.attn_conv, 3);            // --set wins over the shape
  EXPECT_EQ(set.model.pos, PosKind::kLearned);  // --set model= changes the shape
  EXPECT_EQ(train_config_from_toml(tiny.to_toml(), "printed").to_toml(), tiny.to_toml());
  // facts sets vocab_size from its task, whatever its shape says
  const TrainConfig facts = train_config_from_file("facts-tiny", {"facts_objects=64"});
  EXPECT_EQ(facts.model.vocab_size, 512 + 16 + 64);

  TempDir dir;
  test::write_text(dir / "shape.toml", "d_model = 32\nn_heads = 2\n");
  test::write_text(dir / "recipe.toml", "model = \"shape.toml\"\nsteps = 3\nwarmup_steps = 0\n");
  const TrainConfig file = train_config_from_file(dir / "recipe.toml");
  EXPECT_EQ(file.model.d_model, 32);  // the shape file beside the recipe
  test::write_text(dir / "bad-shape.toml", "steps = 3\n");
  test::write_text(dir / "bad.toml", "model = \"bad-shape.toml\"\n");
  try {
    train_config_from_file(dir / "bad.toml");
    FAIL() << "a shape with a trainer key was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'steps' is not a model key"), std::string::npos)
        << e.what();
  }
  try {
    train_config_from_file("mqar-tiny", {"model=no-such-shape"});
    FAIL() << "an unknown shape was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("tiny-attn"), std::string::npos) << e.what();
  }
}

// Every shape of models/ lists every model key: a shape says all of the model, so the Python
// readers (python/recall_model.py, scripts/peer_gpt.py) need no copy of recall's defaults.
TEST(ModelShapes, EveryShapeListsEveryModelKeyAndMatchesItsFile) {
  EXPECT_EQ(model_shape_names().size(), 5u);
  for (const auto& name : model_shape_names()) {
    const auto table = read_model_shape(name);
    for (const auto& key : model_config_keys())
      EXPECT_TRUE(table.contains(key)) << name << " " << key;
    EXPECT_EQ(*model_shape_toml(name),
              test::read_text(recall::test::source_dir() + "/models/" + name + ".toml"));
    EXPECT_NO_THROW(model_config_from_toml(table)) << name;
  }
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
  EXPECT_NE(trained.err.find("bits/char"), std::string::npos) << "the eval line of a text run";
  EXPECT_NE(trained.err.find("# text: " + (dir / "corpus.txt") + " (1 file, 1440 bytes"),
            std::string::npos)
      << "the corpus size and split are printed";

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
  // the checkpoint's validation bits per character, as its run logged them, beside the text
  const double bpc = nlohmann::json::parse(trained.out)["eval"]["bits_per_char"].get<double>();
  EXPECT_NE(sample.err.find(fmt::format("(step 60): {:.4f} validation bits per character", bpc)),
            std::string::npos)
      << sample.err;

  const auto bad = test::run_cli({"sample", "--checkpoint", dir / "run", "--prompt", "xyz"}, dir);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("not in the model's vocabulary"), std::string::npos) << bad.err;
}

// best.bin holds the state at the evaluation of lowest validation loss; eval reads it by its path.
// The training text cycles a..h forwards and the held-out tail backwards, so learning the one
// raises the loss on the other and the best is not the last.
TEST(TrainRuns, BestCheckpointIsTheLowestValidationLoss) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 2700; ++i) text += static_cast<char>('a' + i % 8);
  for (int i = 0; i < 300; ++i) text += static_cast<char>('h' - i % 8);
  test::write_text(dir / "corpus.txt", text);
  test::write_text(dir / "t.toml",
                   "task = \"text\"\ntext_file = \"corpus.txt\"\nseq_len = 32\n"
                   "d_model = 32\nn_layers = 1\nn_heads = 2\nsteps = 40\nbatch_size = 16\n"
                   "lr = 1e-2\nmin_lr = 1e-2\nwarmup_steps = 5\nweight_decay = 0\n"
                   "eval_every = 10\neval_batches = 2\nlog_every = 20\n");
  const auto trained = test::run_cli(
      {"train", "--config", dir / "t.toml", "--out", dir / "run", "--threads", "1"}, dir);
  ASSERT_EQ(trained.code, 0) << trained.err;
  double best = 1e9, last = 0;
  int64_t best_step = -1;
  std::istringstream metrics(test::read_text(dir / "run/metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("eval")) continue;
    last = j["eval"]["loss"].get<double>();
    if (last < best) best = last, best_step = j["step"].get<int64_t>();
  }
  EXPECT_GT(last, best * 1.02) << "the held-out loss rises, so the best is not the last";
  const auto at_best =
      test::run_cli({"eval", "--checkpoint", dir / "run/best.bin", "--threads", "1"}, dir);
  ASSERT_EQ(at_best.code, 0) << at_best.err;
  const auto j = nlohmann::json::parse(at_best.out);
  EXPECT_EQ(j["step"].get<int64_t>(), best_step);
  EXPECT_NEAR(j["loss"].get<double>(), best, 1e-5);
  EXPECT_NEAR(j["bits_per_char"].get<double>(), best / std::log(2.0), 1e-5);
  const auto at_last = test::run_cli({"eval", "--checkpoint", dir / "run", "--threads", "1"}, dir);
  ASSERT_EQ(at_last.code, 0) << at_last.err;
  EXPECT_EQ(nlohmann::json::parse(at_last.out)["step"].get<int64_t>(), 40);
  EXPECT_NEAR(nlohmann::json::parse(at_last.out)["loss"].get<double>(), last, 1e-5);
}

}  // namespace
}  // namespace recall
