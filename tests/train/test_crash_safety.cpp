// Crash safety of the real binary: a training run killed with SIGKILL halfway through a checkpoint
// write (arranged: the binary stops itself there) and at random moments (during steps, metric
// writes and checkpoint writes alike) always leaves a checkpoint that loads, and
// resuming from it again and again ends with the same per-step losses and the same final
// checkpoint bytes as a run that was never killed. A second SIGINT ends a run at once.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <random>

#include "recall/train/checkpoint.h"
#include "train_test_util.h"

namespace recall {
namespace {

using test::TempDir;

std::vector<std::string> train_args(const std::string& cfg, const std::string& out, int steps) {
  return {"train", "--config",           cfg,     "--set",           fmt::format("steps={}", steps),
          "--set", "checkpoint_every=1", "--set", "peak_flops=1e12", "--out",
          out,     "--threads",          "1"};
}

// step -> its metrics line without the timings (loss, lr, grad_norm).
std::map<int64_t, std::string> step_losses(const std::string& metrics_file) {
  std::map<int64_t, std::string> out;
  std::istringstream in(test::read_text(metrics_file));
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("loss")) continue;
    j.erase("tokens_per_s");
    j.erase("mfu");
    out[j["step"].get<int64_t>()] = j.dump();
  }
  return out;
}

struct KillStats {
  int kills = 0, resumes = 0, mid_write = 0, before_first_checkpoint = 0;
};

// Trains `steps` steps into dir/killed: up to `max_kills` times the process is started (with
// --resume once a checkpoint exists) and killed after a random delay in [lo, hi); then a last run
// finishes. After every kill the checkpoint must load and never go back in steps.
KillStats kill_until_done(const TempDir& dir, const std::string& cfg, int steps, int max_kills,
                          std::chrono::microseconds lo, std::chrono::microseconds hi,
                          uint32_t seed) {
  KillStats s;
  const std::string out = dir / "killed";
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> delay(lo.count(), hi.count());
  int64_t last_step = 0;
  for (int round = 0; round <= max_kills; ++round) {
    auto args = train_args(cfg, out, steps);
    if (std::filesystem::exists(out + "/checkpoint.bin")) args.push_back("--resume"), ++s.resumes;
    // The first run stops itself halfway through writing its third checkpoint and is killed
    // there: the case this test exists for happens every time, not only when a random kill
    // falls inside a write.
    const bool mid_write = round == 0;
    test::Proc p = test::spawn_cli(
        args, dir,
        mid_write ? std::vector<std::string>{"RECALL_STOP_IN_WRITE=checkpoint.bin:3"}
                  : std::vector<std::string>{});
    if (round == max_kills) {  // the last run goes to the end
      EXPECT_EQ(test::wait_cli(p), 0) << test::read_text(p.err_file);
      return s;
    }
    int status = 0;
    if (mid_write) {
      EXPECT_EQ(::waitpid(p.pid, &status, WUNTRACED), p.pid);
      EXPECT_TRUE(WIFSTOPPED(status)) << "it did not stop in its checkpoint write\n"
                                      << test::read_text(p.err_file);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(delay(rng)));
    }
    ::kill(p.pid, SIGKILL);
    ::waitpid(p.pid, &status, 0);
    if (WIFEXITED(status)) {  // it finished before the kill
      EXPECT_EQ(WEXITSTATUS(status), 0) << test::read_text(p.err_file);
      return s;
    }
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
    ++s.kills;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(out, ec))
      if (e.path().filename().string().rfind(".checkpoint.bin.tmp", 0) == 0) {
        ++s.mid_write;
        break;
      }
    if (!std::filesystem::exists(out + "/checkpoint.bin")) {
      ++s.before_first_checkpoint;
      EXPECT_EQ(last_step, 0) << "the checkpoint disappeared";
      continue;
    }
    const int64_t at = load_checkpoint(out).step;  // throws if it is torn
    EXPECT_GE(at, last_step);
    last_step = at;
  }
  return s;
}

void kill_test(int steps, int kills, uint32_t seed) {
  TempDir dir;
  const std::string cfg = dir / "c.toml";
  test::write_text(cfg, test::tiny_mqar_toml());
  // The run never killed, timed (start-up to its first step, and the whole) to spread the kills
  // over the run: from late in the start-up to a share of the steps past it.
  using us = std::chrono::microseconds;
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] {
    return std::chrono::duration_cast<us>(std::chrono::steady_clock::now() - t0);
  };
  test::Proc p = test::spawn_cli(train_args(cfg, dir / "straight", steps), dir);
  while (test::read_text(dir / "straight/metrics.jsonl").empty() &&
         since() < std::chrono::minutes(2))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const us start = since();
  ASSERT_EQ(test::wait_cli(p), 0) << test::read_text(p.err_file);
  const us whole = since();
  const KillStats s = kill_until_done(dir, cfg, steps, kills, 3 * start / 4,
                                      start + 5 * (whole - start) / (2 * kills), seed);
  std::printf(
      "[ killed ] %d kills (%d during a checkpoint write, %d before the first checkpoint), %d "
      "resumes, %d steps; a whole run %.2f s, %.2f s of it start-up\n",
      s.kills, s.mid_write, s.before_first_checkpoint, s.resumes, steps,
      static_cast<double>(whole.count()) / 1e6, static_cast<double>(start.count()) / 1e6);
  EXPECT_GE(s.kills, 1);
  EXPECT_GE(s.mid_write, 1) << "no kill fell during a checkpoint write";
  EXPECT_EQ(step_losses(dir / "killed/metrics.jsonl"), step_losses(dir / "straight/metrics.jsonl"));
  EXPECT_EQ(step_losses(dir / "straight/metrics.jsonl").size(), static_cast<size_t>(steps));
  EXPECT_EQ(test::read_text(dir / "killed/checkpoint.bin"),
            test::read_text(dir / "straight/checkpoint.bin"));
  for (const auto& e : std::filesystem::directory_iterator(dir / "killed"))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos)
        << e.path() << " left over";
}

TEST(CrashSafety, KilledAtRandomPointsResumesToTheSameLosses) {
  kill_test(/*steps=*/40, /*kills=*/10, /*seed=*/1);
}

// The longer version: many more kills over a longer run.
TEST(CrashSafetyLong, KilledAtRandomPointsResumesToTheSameLosses) {
  kill_test(/*steps=*/200, /*kills=*/60, /*seed=*/2);
}

// extrapolate trains one run per rule: SIGINT stops the run in progress after a checkpoint, the
// command exits 130 naming how to resume, and the same command then finishes every run.
TEST(CrashSafety, ExtrapolateStopsOnSigintAndResumes) {
  TempDir dir;
  const std::string cfg = dir / "c.toml";
  test::write_text(cfg, test::tiny_mqar_toml());
  const std::vector<std::string> args = {
      "extrapolate", "--config", cfg,     "--set",   "steps=300", "--rules", "none,su",
      "--lengths",   "1,2",      "--out", dir / "x", "--threads", "1"};
  test::Proc p = test::spawn_cli(args, dir);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (test::read_text(dir / "x/none/metrics.jsonl").size() < 200 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::kill(p.pid, SIGINT);
  EXPECT_EQ(test::wait_cli(p), 130) << test::read_text(p.err_file);
  const std::string err = test::read_text(p.err_file);
  EXPECT_NE(err.find("stopped by signal 2"), std::string::npos) << err;
  EXPECT_NE(err.find("the same command resumes"), std::string::npos) << err;
  const int64_t at = load_checkpoint(dir / "x/none").step;
  EXPECT_GT(at, 0);
  EXPECT_LT(at, 300);
  EXPECT_FALSE(std::filesystem::exists(dir / "x/su"));

  const auto again = test::run_cli(args, dir);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(load_checkpoint(dir / "x/none").step, 300);
  EXPECT_EQ(load_checkpoint(dir / "x/su").step, 300);
  EXPECT_EQ(step_losses(dir / "x/none/metrics.jsonl").size(), 300u);
}

// A second SIGINT while the first waits for the step to end: the process ends at once, by the
// signal (the first alone gives exit code 130 after a checkpoint). SIGINT is sent every 50 ms, so
// that two arrive apart (two sent before the process runs again count as one).
TEST(CrashSafety, SecondSigintEndsAtOnce) {
  TempDir dir;
  const std::string cfg = dir / "c.toml";
  test::write_text(cfg, test::tiny_mqar_toml());
  auto args = std::vector<std::string>{
      "train", "--config",        cfg,     "--set",   "steps=1000", "--set", "batch_size=1024",
      "--set", "peak_flops=1e12", "--out", dir / "r", "--threads",  "1"};
  test::Proc p = test::spawn_cli(args, dir);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  // config.toml is written once the handlers are in place
  while (!std::filesystem::exists(dir / "r/config.toml") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  int status = 0;
  while (::waitpid(p.pid, &status, WNOHANG) == 0) {
    ::kill(p.pid, SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit code " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGINT);
}

}  // namespace
}  // namespace recall
