// `--nproc`'s launcher: it kills a rank still running once the others' timeout has passed, and
// its ranks end with it when it is killed outright.
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "train_test_util.h"

namespace recall {
namespace {

using test::TempDir;
using test::train_args;
using test::wait_for;
using test::wait_for_file;

// The value of `name` in process `pid`'s environment ("" when unset).
std::string environ_value(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  for (std::string entry; std::getline(in, entry, '\0');)
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  return "";
}

// Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER) while it
// lives: a rank its launcher left, running or a zombie, becomes a child of ours, which waitpid
// sees, whatever PID 1 does with orphans.
struct Subreaper {
  Subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }
  ~Subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
};

// Whether `pid` is a child of ours, running or a zombie (the launcher left it to us).
bool our_child(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

// --nproc 2: rank 0 killed, rank 1 stopped (a hang it cannot leave on its own). The launcher kills
// rank 1 once --dist-timeout plus 10 s have passed since rank 0 failed, reaps it, and exits with
// rank 0's code.
TEST(LaunchLocal, KillsARankStillRunningAfterTheTimeout) {
  const Subreaper subreaper;
  TempDir dir;
  const std::string cfg = dir / "c.toml";
  test::write_text(cfg, test::tiny_mqar_toml());
  constexpr int kTimeout = 2;
  const test::Proc launcher =
      test::spawn_cli(train_args(cfg, dir / "run",
                                 {"--set", "steps=1000000", "--set", "checkpoint_every=3",
                                  "--nproc", "2", "--dist-timeout", std::to_string(kTimeout)}),
                      dir, {}, "launcher_");
  wait_for_file(dir / "run/checkpoint.bin");
  pid_t rank[2] = {-1, -1};
  {
    const std::string id = std::to_string(launcher.pid);
    std::ifstream children("/proc/" + id + "/task/" + id + "/children");
    for (pid_t child; children >> child;) {
      const std::string r = environ_value(child, "RANK");
      if (r == "0" || r == "1") rank[std::stoi(r)] = child;
    }
  }
  ASSERT_GT(rank[0], 0);
  ASSERT_GT(rank[1], 0);
  ::kill(rank[1], SIGSTOP);
  // stopped before rank 0 dies, so that it cannot notice and exit on its own
  EXPECT_EQ(test::wait_for_stopped(rank[1], true), "T");
  ::kill(rank[0], SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const int code = wait_for(launcher, std::chrono::seconds(kTimeout + 10 + 20));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  if (code == -1) {
    ::kill(-launcher.pid, SIGKILL);
    ::kill(rank[1], SIGKILL);
    test::wait_cli(launcher);
  }
  const std::string err = test::read_text(launcher.err_file);
  EXPECT_EQ(code, 128 + SIGKILL) << err;
  EXPECT_GE(took, kTimeout + 10 - 0.5) << err;  // not before the ranks' own chance to fail
  EXPECT_NE(err.find("rank 0 exited with code 137"), std::string::npos) << err;
  // rank 1 was reaped by the launcher: neither running nor a zombie left to us
  EXPECT_FALSE(our_child(rank[1])) << test::process_states(rank[1]);
}

// --nproc 2, the launcher killed outright (SIGKILL: it passes nothing on): its ranks end with it,
// as a SIGTERM stops them, rather than train on.
TEST(LaunchLocal, RanksEndWithALauncherKilledOutright) {
  const Subreaper subreaper;  // the orphaned ranks become ours, so their exit codes are seen
  TempDir dir;
  const std::string cfg = dir / "c.toml";
  test::write_text(cfg, test::tiny_mqar_toml());
  const test::Proc launcher = test::spawn_cli(
      train_args(cfg, dir / "run",
                 {"--set", "steps=1000000", "--set", "checkpoint_every=3", "--nproc", "2"}),
      dir, {}, "launcher_");
  wait_for_file(dir / "run/checkpoint.bin");
  std::vector<pid_t> ranks;
  const std::string id = std::to_string(launcher.pid);
  std::ifstream children("/proc/" + id + "/task/" + id + "/children");
  for (pid_t child; children >> child;) ranks.push_back(child);
  ASSERT_EQ(ranks.size(), 2u);
  ::kill(launcher.pid, SIGKILL);
  EXPECT_EQ(test::wait_cli(launcher), 128 + SIGKILL);
  // Orphaned, the ranks are ours: each stops as a SIGTERM stops it, within 60 s
  for (pid_t rank : ranks) {
    const int code = wait_for(test::Proc{rank, "", ""}, std::chrono::seconds(60));
    if (code == -1) {
      ::kill(rank, SIGKILL);
      ::waitpid(rank, nullptr, 0);
    }
    EXPECT_EQ(code, 128 + SIGTERM) << test::read_text(launcher.err_file);
  }
}

}  // namespace
}  // namespace recall
