// `recall bench train`: the preset is a training config of the peer's shape; the benchmark is a
// run of train() whose own step timings it reports.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "recall/core/machine.h"
#include "recall/experiments/bench_train.h"
#include "recall/ops/gemm.h"
#include "recall/train/estimates.h"
#include "recall/train/trainer.h"
#include "test_paths.h"
#include "train_test_util.h"

namespace recall {
namespace {

TEST(BenchTrain, PresetIsATrainingConfigOfThePeersShape) {
  const TrainConfig c =
      train_config_from_file(recall::test::source_dir() + "/train/bench-gpt.toml");
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
  EXPECT_GT(r.peak_gflops, 0);
  EXPECT_NEAR(r.tokens_per_s * r.step_ms / 1e3, 8 * 32, 1e-6);  // batch_size x seq_len per step
  // The FLOPs a token costs, counted here from the parameters themselves rather than by the
  // trainer's count: 6 per weight (forward and backward), less the head's rows at the positions
  // mqar does not score (4 of 32 are), plus attention's 12 L d T (PaLM's appendix B).
  double weights = 0;
  for (const auto& p : Transformer(cfg.model)->parameters()) weights += p.numel();
  const double unscored_head = 32.0 * 32.0 * (1.0 - 4.0 / 32.0);  // vocab x d_model
  const double flops = 6.0 * (weights - unscored_head) + 12.0 * 1 * 32 * 32;
  EXPECT_NEAR(r.mfu, r.tokens_per_s * flops / (r.peak_gflops * 1e9), 1e-9 * r.mfu);
  EXPECT_LT(r.useful_mfu, r.mfu);  // the lookups and the masked half of attention left out
  // against the measured GEMM rate alone, at most the peak (the larger of it and the theoretical)
  EXPECT_GT(r.gemm_gflops, 0);
  EXPECT_LE(r.gemm_gflops, r.peak_gflops * (1 + 1e-12));
  EXPECT_NEAR(r.useful_gemm, r.useful_mfu * r.peak_gflops / r.gemm_gflops, 1e-9 * r.useful_gemm);
  auto j = nlohmann::json::parse(to_json(r));
  EXPECT_EQ(j["impl"], "recall-cpp");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["gemm"], gemm_backend());
  EXPECT_TRUE(j["peak"] == "measured" || j["peak"] == "theoretical") << j["peak"];
  for (const char* key :
       {"params", "tokens_per_s", "step_ms", "peak_gflops", "mfu", "flops_per_token_6n_12ldt",
        "useful_flops_per_token", "useful_mfu", "gemm_gflops", "useful_gemm"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_THROW(bench_train(cfg, 2), std::invalid_argument);  // both steps would be warm-up
}

// Every other timed step recorded: the parts of those steps add up to their wall time, each phase
// of the step has its share, and the unrecorded steps alone give the throughput.
TEST(BenchTrain, ProfileAddsUpToTheRecordedSteps) {
  const TrainConfig cfg = test::tiny_mqar({"steps=8", "n_layers=1"});
  const BenchTrainResult r = bench_train(cfg, 0, torch::kCPU, /*profile=*/true);
  EXPECT_EQ(r.profiled_steps, 3);  // steps 4, 6 and 8; 3, 5 and 7 timed; 1 and 2 warm-up
  EXPECT_EQ(r.timed_steps, 3);
  EXPECT_NEAR(r.profile.total() * 1e3, r.profiled_step_ms, 1e-9 * r.profiled_step_ms);
  for (StepPart p : {StepPart::kGemm, StepPart::kAttention, StepPart::kNorms, StepPart::kLoss,
                     StepPart::kData, StepPart::kClip, StepPart::kOptimizer})
    EXPECT_GT(r.profile[p], 0.0) << to_string(p);
  for (double s : r.profile.seconds) EXPECT_GE(s, -1e-6);
  EXPECT_NEAR(r.tokens_per_s * r.step_ms / 1e3, 8 * 32, 1e-6);
  auto j = nlohmann::json::parse(to_json(r));
  ASSERT_TRUE(j.contains("profile_ms"));
  EXPECT_EQ(j["profile_ms"].size(), kStepParts + 1);  // every part and their sum
  EXPECT_EQ(j["profiled_steps"], 3);
  EXPECT_FALSE(nlohmann::json::parse(to_json(bench_train(cfg))).contains("profile_ms"));
}

// bench-gpt, whose MFU against a single torch::mm timing read up to 1.17: against the peak it
// cannot exceed 1. Ratios in the tests of the peak itself (Machine.*).
TEST(BenchTrain, BenchGptMfuIsAtMostOne) {
  TrainConfig cfg = train_config_from_file("bench-gpt");
  cfg.trainer.steps = 5;
  const BenchTrainResult r = bench_train(cfg);
  EXPECT_GT(r.mfu, 0);
  EXPECT_LE(r.mfu, 1.0) << "the peak (" << r.peak_gflops << " GFLOP/s, " << r.peak_kind
                        << ") is below what training reached";
  EXPECT_LE(r.useful_mfu, r.mfu);
}

TEST(BenchTrain, UsefulFlopsLeaveOutLookupsAndTheMaskedHalfOfAttention) {
  TrainConfig cfg = train_config_from_file("bench-gpt");
  const int64_t n = Transformer(cfg.model)->num_parameters();
  const auto& m = cfg.model;
  // mqar scores 8 of the 256 positions, where alone the head runs
  const double unscored = static_cast<double>(m.vocab_size * m.d_model) * (1.0 - 8.0 / 256.0);
  // untied head, learned positions: the token and position tables are looked up
  EXPECT_DOUBLE_EQ(useful_flops_per_token(cfg, n),
                   6.0 * (n - (m.vocab_size + m.seq_len) * m.d_model - unscored) +
                       6.0 * m.n_layers * m.d_model * (m.seq_len + 1));
  EXPECT_DOUBLE_EQ(flops_per_token(cfg, n),
                   6.0 * (n - unscored) + 12.0 * m.n_layers * m.d_model * m.seq_len);
  cfg.model.tied_head = true;  // the table is the head's weight: multiplied
  cfg.model.pos = PosKind::kRope;
  const int64_t nt = Transformer(cfg.model)->num_parameters();
  EXPECT_DOUBLE_EQ(useful_flops_per_token(cfg, nt),
                   6.0 * (nt - unscored) + 6.0 * m.n_layers * m.d_model * (m.seq_len + 1));
}

TEST(BenchTrain, TheHeadCountsAtTheScoredPositionsOnly) {
  // mqar-store: 8 of 32 positions scored, where alone the head (8,449 x 64) runs
  TrainConfig cfg = train_config_from_file("mqar-store");
  const int64_t n = Transformer(cfg.model)->num_parameters();
  const auto& m = cfg.model;
  const double head = static_cast<double>(m.vocab_size * m.d_model);
  EXPECT_DOUBLE_EQ(flops_per_token(cfg, n),
                   6.0 * (n - head * 24.0 / 32.0) + 12.0 * m.n_layers * m.d_model * m.seq_len);
  EXPECT_DOUBLE_EQ(
      useful_flops_per_token(cfg, n),
      6.0 * (n - head - head * 24.0 / 32.0) + 6.0 * m.n_layers * m.d_model * (m.seq_len + 1));
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
