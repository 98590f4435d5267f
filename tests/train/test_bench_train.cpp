// `recall bench train`: the preset, config errors, one tiny run and the CLI's exit code.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "recall/train/bench_train.h"

namespace recall {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(BenchTrain, PresetHasThePeersShape) {
  auto o = bench_train_options_from_file(RECALL_SOURCE_DIR "/models/bench-gpt.toml");
  EXPECT_EQ(o.model.vocab_size, 96);
  EXPECT_EQ(o.model.d_model, 128);
  EXPECT_EQ(o.model.n_layers, 4);
  EXPECT_EQ(o.model.n_heads, 4);
  EXPECT_EQ(o.model.seq_len, 256);
  EXPECT_EQ(o.model.pos, PosKind::kLearned);
  EXPECT_EQ(o.model.norm, NormKind::kLayerNorm);
  EXPECT_EQ(o.model.activation, Activation::kGelu);
  EXPECT_TRUE(o.model.bias);
  EXPECT_FALSE(o.model.tied_head);
  EXPECT_EQ(o.batch_size, 16);
  EXPECT_DOUBLE_EQ(o.lr, 1e-3);
}

TEST(BenchTrain, ConfigErrorsNameTheKey) {
  auto expect_message = [](const std::string& text, const std::string& fragment) {
    try {
      bench_train_options_from_file(write_temp("bench.toml", text));
      FAIL() << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_message("d_modle = 64\n", "unknown key 'd_modle'");
  expect_message("batch_size = 0\n", "batch_size");
  expect_message("lr = -1.0\n", "lr");
  expect_message("d_model = 130\n", "d_model = 130");
  expect_message("d_model = \n", "bench.toml:1");
  EXPECT_THROW(bench_train_options_from_file("/nonexistent/bench.toml"), std::invalid_argument);
  // a preset name works from any folder and is the file's copy
  EXPECT_EQ(bench_train_options_from_file("bench-gpt").model.d_model, 128);
}

TEST(BenchTrain, TinyRunPrintsEveryField) {
  BenchTrainOptions o;
  o.model.vocab_size = 11;
  o.model.d_model = 16;
  o.model.n_layers = 1;
  o.model.n_heads = 2;
  o.model.seq_len = 8;
  o.batch_size = 2;
  o.steps = 2;
  auto r = bench_train(o);
  EXPECT_GT(r.params, 0);
  EXPECT_GT(r.tokens_per_s, 0);
  EXPECT_GT(r.gemm_gflops, 0);
  EXPECT_NEAR(r.mfu, r.tokens_per_s * (6.0 * r.params + 12.0 * 1 * 16 * 8) / (r.gemm_gflops * 1e9),
              1e-9 * r.mfu);
  auto j = nlohmann::json::parse(to_json(r));
  EXPECT_EQ(j["impl"], "recall-cpp");
  for (const char* key : {"params", "tokens_per_s", "step_ms", "gemm_gflops", "mfu"})
    EXPECT_TRUE(j.contains(key)) << key;
}

TEST(BenchTrain, CliExitsWithTwoOnABadConfig) {
  const std::string path = write_temp("bad-bench.toml", "n_heads = 3\n");
  const std::string cmd =
      std::string(RECALL_BINARY) + " bench train --config " + path + " 2>/dev/null";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace recall
