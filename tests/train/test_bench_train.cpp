// `recall bench train`: the preset is a training config of the peer's shape; the benchmark is a
// run of train() whose own step timings it reports.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "recall/train/bench_train.h"
#include "recall/train/trainer.h"
#include "train_test_util.h"

namespace recall {
namespace {

TEST(BenchTrain, PresetIsATrainingConfigOfThePeersShape) {
  const TrainConfig c = train_config_from_file(RECALL_SOURCE_DIR "/models/bench-gpt.toml");
  EXPECT_EQ(c.model.vocab_size, 96);
  EXPECT_EQ(c.model.d_model, 128);
  EXPECT_EQ(c.model.n_layers, 4);
  EXPECT_EQ(c.model.n_heads, 4);
  EXPECT_EQ(c.model.seq_len, 256);
  EXPECT_EQ(c.model.pos, PosKind::kLearned);
  EXPECT_EQ(c.model.norm, NormKind::kLayerNorm);
  EXPECT_EQ(c.model.activation, Activation::kGelu);
  EXPECT_EQ(c.model.ffn_mult, 4);
  EXPECT_TRUE(c.model.bias);
  EXPECT_FALSE(c.model.tied_head);
  EXPECT_EQ(c.trainer.batch_size, 16);
  EXPECT_DOUBLE_EQ(c.trainer.lr, 1e-3);
  EXPECT_DOUBLE_EQ(c.trainer.beta2, 0.999);
  // a preset name works from any folder and is the file's copy
  EXPECT_EQ(train_config_from_file("bench-gpt").to_toml(), c.to_toml());
}

TEST(BenchTrain, TinyRunReportsTheTrainersTimings) {
  const TrainConfig cfg = test::tiny_mqar({"steps=5", "n_layers=1"});
  const BenchTrainResult r = bench_train(cfg);
  EXPECT_EQ(r.params, Transformer(cfg.model)->num_parameters());
  EXPECT_GT(r.tokens_per_s, 0);
  EXPECT_GT(r.gemm_gflops, 0);
  EXPECT_NEAR(r.tokens_per_s * r.step_ms / 1e3, 8 * 32, 1e-6);  // batch_size x seq_len per step
  EXPECT_NEAR(r.mfu, r.tokens_per_s * flops_per_token(cfg, r.params) / (r.gemm_gflops * 1e9),
              1e-9 * r.mfu);
  auto j = nlohmann::json::parse(to_json(r));
  EXPECT_EQ(j["impl"], "recall-cpp");
  EXPECT_EQ(j["device"], "cpu");
  for (const char* key : {"params", "tokens_per_s", "step_ms", "gemm_gflops", "mfu"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_THROW(bench_train(cfg, 2), std::invalid_argument);  // both steps would be warm-up
}

TEST(BenchTrain, CliExitsWithTwoOnABadConfig) {
  test::TempDir dir;
  test::write_text(dir / "bad.toml", "n_heads = 3\n");
  test::expect_usage_errors({{{"bench", "train", "--config", dir / "bad.toml"}, "n_heads"},
                             {{"bench", "train", "--config", dir / "none.toml"}, "none.toml"}},
                            dir);
}

}  // namespace
}  // namespace recall
