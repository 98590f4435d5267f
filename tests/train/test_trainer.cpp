#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "old_model_archive.h"
#include "recall/core/error.h"
#include "recall/core/signals.h"
#include "recall/train/checkpoint.h"
#include "recall/train/trainer.h"
#include "train_test_util.h"

namespace recall {
namespace {

using test::TempDir;

TrainResult run(const TrainConfig& cfg, const std::string& out, bool resume = false,
                int64_t stop_at = 0) {
  return test::run_quietly(cfg, out, resume, stop_at);
}

TEST(Schedule, WarmupThenCosine) {
  TrainerConfig c;
  c.steps = 110;
  c.warmup_steps = 10;
  c.lr = 1.0;
  c.min_lr = 0.1;
  EXPECT_DOUBLE_EQ(lr_at(c, 0), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(c, 9), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(c, 10), 1.0);
  EXPECT_NEAR(lr_at(c, 60), 0.55, 1e-12);
  EXPECT_NEAR(lr_at(c, 110), 0.1, 1e-12);
}

TEST(Trainer, SameSeedSameLosses) {
  TempDir dir;
  const auto a = run(test::tiny_mqar(), dir / "a");
  const auto b = run(test::tiny_mqar(), dir / "b");
  const auto c = run(test::tiny_mqar({"seed=8"}), dir / "c");
  ASSERT_EQ(a.losses.size(), 12u);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_NE(a.losses, c.losses);
  EXPECT_EQ(a.eval, b.eval);
}

// The data-parallel step reduces in a fixed order: two runs with the same seed on 2 threads (two
// workers) write the same checkpoint, byte for byte.
TEST(Trainer, SameSeedSameCheckpointBytesOnTwoThreads) {
  TempDir dir;
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  run(test::tiny_mqar({"steps=8"}), dir / "a");
  run(test::tiny_mqar({"steps=8"}), dir / "b");
  at::set_num_threads(threads);
  const std::string a = test::read_text(dir / "a/checkpoint.bin");
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == test::read_text(dir / "b/checkpoint.bin"));
}

TEST(Trainer, ResumeContinuesExactly) {
  TempDir dir;
  const TrainConfig cfg = test::tiny_mqar({"eval_every=4"});
  const auto straight = run(cfg, dir / "straight");
  const auto first = run(cfg, dir / "split", false, 6);
  EXPECT_EQ(first.stopped_by, 99);
  EXPECT_EQ(load_checkpoint(dir / "split").step, 6);
  const auto second = run(cfg, dir / "split", true);
  std::vector<double> joined = first.losses;
  joined.insert(joined.end(), second.losses.begin(), second.losses.end());
  EXPECT_EQ(joined, straight.losses);  // bit for bit
  EXPECT_EQ(second.eval, straight.eval);
  // the metrics of the resumed run read like those of the straight one
  auto lines = [](const std::string& f) {
    std::vector<std::string> out;
    std::istringstream in(test::read_text(f));
    for (std::string l; std::getline(in, l);) {
      auto j = nlohmann::json::parse(l);
      j.erase("tokens_per_s");
      j.erase("mfu");
      out.push_back(j.dump());
    }
    return out;
  };
  EXPECT_EQ(lines(dir / "split/metrics.jsonl"), lines(dir / "straight/metrics.jsonl"));
}

// A run checkpointed before the blocks were the list "blocks" (its model under block0., ...)
// resumes to the losses of the straight run, bit for bit.
TEST(Trainer, ResumeFromACheckpointWithTheOldBlockNames) {
  TempDir dir;
  const TrainConfig cfg = test::tiny_mqar();
  const auto straight = run(cfg, dir / "straight");
  const auto first = run(cfg, dir / "split", false, 6);
  Checkpoint ckpt = load_checkpoint(dir / "split");
  Transformer model(cfg.model);
  load_module_bytes(*model, ckpt.model);
  ckpt.model = test::old_layout_bytes(*model);
  save_checkpoint(checkpoint_path(dir / "split"), ckpt);
  const auto second = run(cfg, dir / "split", true);
  std::vector<double> joined = first.losses;
  joined.insert(joined.end(), second.losses.begin(), second.losses.end());
  EXPECT_EQ(joined, straight.losses);
}

TEST(Trainer, RefusesExistingRunAndMismatchedResume) {
  TempDir dir;
  run(test::tiny_mqar({"steps=4"}), dir / "r");
  EXPECT_THROW(run(test::tiny_mqar({"steps=4"}), dir / "r"), UsageError);
  try {
    run(test::tiny_mqar({"steps=4", "d_model=64"}), dir / "r", true);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("d_model = 32, this run has d_model = 64"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(run(test::tiny_mqar(), dir / "none", true), UsageError);
}

TEST(Trainer, CorruptCheckpointIsRefusedOnResume) {
  TempDir dir;
  run(test::tiny_mqar({"steps=4"}), dir / "r");
  std::string bytes = test::read_text(dir / "r/checkpoint.bin");
  bytes[bytes.size() / 2] ^= 0x01;
  test::write_text(dir / "r/checkpoint.bin", bytes);
  try {
    run(test::tiny_mqar({"steps=4"}), dir / "r", true);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
}

TEST(Trainer, NonFiniteLossStopsAndKeepsLastGoodCheckpoint) {
  TempDir dir;
  // an absurd learning rate drives the weights to overflow within a few steps
  const TrainConfig cfg =
      test::tiny_mqar({"lr=1e20", "min_lr=1e20", "warmup_steps=0", "weight_decay=0", "grad_clip=0",
                       "checkpoint_every=1", "steps=50"});
  try {
    run(cfg, dir / "r");
    FAIL() << "expected a non-finite stop";
  } catch (const NonFiniteError& e) {
    const Checkpoint last = load_checkpoint(dir / "r");
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(fmt::format("step {}: the ", last.step + 1), 0), 0u) << msg;
    EXPECT_NE(msg.find("last checkpoint is kept"), std::string::npos) << msg;
    Transformer model(cfg.model);
    load_module_bytes(*model, last.model);
    for (const auto& p : model->parameters()) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
  }
}

// The threads of process `pid` that signal `sig` could interrupt: from /proc, those whose SigBlk
// mask (hex, bit sig - 1) does not block it. The signal thread, which waits for it in sigwait
// (and so unblocks it while it waits), is named "signals" in the list.
std::vector<std::string> threads_taking(pid_t pid, int sig) {
  std::vector<std::string> taking;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream status(task.path() / "status");
    std::optional<bool> blocked;  // none when the thread ended since the folder was listed
    for (std::string line; std::getline(status, line);)
      if (line.rfind("SigBlk:", 0) == 0)
        blocked = (std::stoull(line.substr(7), nullptr, 16) >> (sig - 1)) & 1;
    std::string name;
    std::getline(std::ifstream(task.path() / "comm"), name);
    if (name == kSignalThreadName)
      taking.push_back("signals");
    else if (blocked == false)
      taking.push_back(task.path().filename().string());
  }
  return taking;
}

// The real binary: SIGTERM finishes the step, writes a checkpoint and exits 143; resuming reaches
// the loss of a run that was never stopped. No thread of the run may take the signal itself (one
// receives it with sigwait): oneDNN's sgemm moves the stack pointer into the heap, and a signal
// frame pushed there corrupted it (glibc aborted about 1 run in 8 here before).
TEST(TrainerCli, SigtermCheckpointsAndResumeMatches) {
  TempDir dir;
  const std::string cfg = dir / "c.toml";
  test::write_text(cfg, test::tiny_mqar_toml());
  auto args = [&](const std::string& out) {  // 2 threads: the data-parallel workers run too
    return std::vector<std::string>{"train", "--config", cfg,         "--set", "steps=400",
                                    "--out", out,        "--threads", "2"};
  };
  test::Proc p = test::spawn_cli(args(dir / "stopped"), dir);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (test::read_text(dir / "stopped/metrics.jsonl").size() < 200 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (int sig : {SIGINT, SIGTERM})
    EXPECT_EQ(threads_taking(p.pid, sig), std::vector<std::string>{"signals"}) << "signal " << sig;
  ::kill(p.pid, SIGTERM);
  EXPECT_EQ(test::wait_cli(p), 143) << test::read_text(p.err_file);
  const int64_t at = load_checkpoint(dir / "stopped").step;
  EXPECT_GT(at, 0);
  EXPECT_LT(at, 400);
  EXPECT_NE(test::read_text(p.err_file).find("stopped by signal 15"), std::string::npos);

  auto resume = args(dir / "stopped");
  resume.push_back("--resume");
  const auto resumed = test::run_cli(resume, dir);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const auto straight = test::run_cli(args(dir / "straight"), dir);
  ASSERT_EQ(straight.code, 0) << straight.err;
  auto summary = [](const std::string& out) {
    const auto end = out.find_last_not_of('\n');
    return nlohmann::json::parse(out.substr(out.rfind('\n', end) + 1));
  };
  EXPECT_EQ(summary(resumed.out)["step"], 400);
  EXPECT_EQ(summary(resumed.out)["loss"], summary(straight.out)["loss"]);
  EXPECT_EQ(summary(resumed.out)["eval"], summary(straight.out)["eval"]);
}

}  // namespace
}  // namespace recall
