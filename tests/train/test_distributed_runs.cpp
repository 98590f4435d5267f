// Data parallelism across processes, the real binary: 2 processes (over loopback, and over a veth
// pair between two network namespaces) train as 1 process does on the whole batch; a rank that
// never comes is named in time; a rank that dies or hangs makes the other fail in time, leaving a
// checkpoint that loads.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "dist_test_util.h"
#include "recall/train/checkpoint.h"
#include "recall/train/distributed.h"
#include "recall/train/launch_local.h"
#include "recall/train/trainer.h"
#include "train_test_util.h"

namespace recall {
namespace {

using test::TempDir;
using test::train_args;
using test::wait_for;
using test::wait_for_file;

std::vector<double> losses(const std::string& metrics_file) {
  std::vector<double> out;
  std::istringstream in(test::read_text(metrics_file));
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

// A port of 127.0.0.1 picked by the kernel and held, bound but not listening, for as long as this
// lives, so no other test can be given it. Held with SO_REUSEADDR (`for_rank0`), a store that rank
// 0 serves can still listen on it (c10d's listener sets SO_REUSEADDR too); held without, nothing
// can listen there, and a connect to it is refused.
class HeldPort {
 public:
  explicit HeldPort(bool for_rank0) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    const int one = 1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd_ < 0 ||
        (for_rank0 && ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("cannot bind a port of 127.0.0.1");
    port_ = ntohs(a.sin_port);
  }
  ~HeldPort() { ::close(fd_); }
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;
  std::vector<std::string> env() const {
    return {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port_)};
  }

 private:
  int fd_;
  int port_ = 0;
};

// Rank `rank` of `world` started as torchrun would start it (without LOCAL_WORLD_SIZE when
// `local` is false), with the store's variables `store`, for a long run.
test::Proc spawn_rank(const TempDir& dir, const std::string& cfg, int rank, int world,
                      const std::vector<std::string>& store, int timeout_s, bool local = true) {
  const std::string tag = "w" + std::to_string(world) + "r" + std::to_string(rank) + "_";
  std::vector<std::string> env{"RANK=" + std::to_string(rank),
                               "WORLD_SIZE=" + std::to_string(world),
                               "LOCAL_RANK=" + std::to_string(rank)};
  env.insert(env.end(), store.begin(), store.end());
  if (local) env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(world));
  return test::spawn_cli(
      train_args(cfg, dir / ("run_" + tag),
                 {"--set", "steps=1000000", "--dist-timeout", std::to_string(timeout_s)}),
      dir, env, tag);
}

// A rank that never comes: the others fail within --dist-timeout, exit 1, with one line naming the
// missing ranks. Rank 0 of 3 alone at a store served here (as by a launcher), and at the same time
// rank 1 of 2 alone at a port where no store listens (rank 0, which would serve it, never comes).
// Rank 0's wait is timed from when it joins (starting LibTorch on a loaded machine is not part of
// it); rank 1's from its start, so its bound holds LibTorch's start too: the timeout plus 5 s.
TEST(DistributedStart, RanksThatNeverJoinAreNamedWithinTheTimeout) {
  TempDir dir;
  const std::string cfg = dir / "c.toml";
  test::write_text(cfg, test::tiny_mqar_toml());
  constexpr int kTimeout = 3;
  const RunStore store(3, std::chrono::seconds(60));
  const HeldPort nobody(false);
  const test::Proc alone0 = spawn_rank(dir, cfg, 0, 3, store.env(), kTimeout);
  const auto spawned = std::chrono::steady_clock::now();
  const test::Proc alone1 = spawn_rank(dir, cfg, 1, 2, nobody.env(), kTimeout);
  while (!store.joined(0) && std::chrono::steady_clock::now() - spawned < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto waiting = std::chrono::steady_clock::now();
  int code = wait_for(alone0, std::chrono::seconds(kTimeout + 2));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - waiting).count();
  if (code == -1) ::kill(alone0.pid, SIGKILL);
  std::string err = test::read_text(alone0.err_file);
  EXPECT_EQ(code, 1) << "after " << took << " s: " << err;
  EXPECT_GE(took, kTimeout - 0.5) << err;
  EXPECT_NE(err.find("error: rank 0 of 3 (store 127.0.0.1:" + std::to_string(store.port()) +
                     "): ranks 1, 2 did not join within 3 s"),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  if (code == -1) test::wait_cli(alone0);

  // From its spawn, LibTorch's start included, which takes seconds under a busy `ctest -j`: the
  // bound is far below the default timeout (kDefaultDistTimeoutSeconds), so a rank that ignored
  // --dist-timeout still fails it, and far above a loaded machine's start.
  constexpr int kSlack = 30;
  static_assert(kTimeout + kSlack < kDefaultDistTimeoutSeconds / 4);
  code = wait_for(
      alone1, spawned + std::chrono::seconds(kTimeout + kSlack) - std::chrono::steady_clock::now());
  if (code == -1) ::kill(alone1.pid, SIGKILL);
  err = test::read_text(alone1.err_file);
  EXPECT_EQ(code, 1) << "not within " << kTimeout + kSlack << " s of its start: " << err;
  EXPECT_NE(err.find("rank 0 did not come within 3 s"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  if (code == -1) test::wait_cli(alone1);
}

// A torchrun-style environment without LOCAL_WORLD_SIZE is refused at every rank (exit 2, one
// line naming it), before any rank waits for another.
TEST(DistributedStart, LocalRankWithoutLocalWorldSizeIsRefusedAtEveryRank) {
  TempDir dir;
  const std::string cfg = dir / "c.toml";
  test::write_text(cfg, test::tiny_mqar_toml());
  const HeldPort nobody(false);  // refused before any rank looks for a store
  std::vector<test::Proc> ranks;
  for (int r = 0; r < 2; ++r) ranks.push_back(spawn_rank(dir, cfg, r, 2, nobody.env(), 600, false));
  for (const auto& p : ranks) {
    const int code = wait_for(p, std::chrono::seconds(60));
    if (code == -1) ::kill(p.pid, SIGKILL);
    const std::string err = test::read_text(p.err_file);
    EXPECT_EQ(code, 2) << err;
    EXPECT_EQ(err.rfind("error: LOCAL_RANK is set but LOCAL_WORLD_SIZE is not", 0), 0u) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    if (code == -1) test::wait_cli(p);
  }
}

// 2 processes with half the batch each follow 1 process with the whole batch: the same data in
// the same order, the loss normalised over the whole batch; only float32 rounding differs (the
// sums over the batch are split in two and added: 1e-5 relative). Stopped by a Ctrl-C (passed on
// once to both ranks, which agree on the step, and checkpoint) and resumed, the run ends in the
// bytes of a run never stopped.
TEST(DistributedRun, TwoProcessesFollowOneAndResumeExactly) {
  TempDir dir;
  const std::string cfg = dir / "c.toml";
  test::write_text(cfg, test::tiny_mqar_toml());
  const std::vector<std::string> curve{"--set", "steps=30", "--set", "checkpoint_every=10"};
  const auto one = test::run_cli(train_args(cfg, dir / "one", curve), dir);
  ASSERT_EQ(one.code, 0) << one.err;
  auto two_args = train_args(cfg, dir / "two", curve);
  two_args.insert(two_args.end(), {"--nproc", "2"});
  const auto two = test::run_cli(two_args, dir);
  ASSERT_EQ(two.code, 0) << two.err;
  const auto l1 = losses(dir / "one/metrics.jsonl"), l2 = losses(dir / "two/metrics.jsonl");
  ASSERT_EQ(l1.size(), 30u);
  ASSERT_EQ(l2.size(), 30u);
  for (size_t i = 0; i < l1.size(); ++i)
    EXPECT_NEAR(l2[i], l1[i], 1e-5 * l1[i]) << "step " << i + 1;
  EXPECT_EQ(load_checkpoint(dir / "two").world_size, 2);
  // rank 1 wrote nothing beside rank 0's folder, and printed nothing
  size_t summaries = 0;
  for (size_t at = two.out.find("\"step\":"); at != std::string::npos;
       at = two.out.find("\"step\":", at + 1))
    ++summaries;
  EXPECT_EQ(summaries, 1u) << two.out;

  // a 1-process resume of a 2-process run is refused before any work
  auto wrong = train_args(cfg, dir / "two", curve);
  wrong.push_back("--resume");
  const auto refused = test::run_cli(wrong, dir);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("trained by 2 processes, this run has 1"), std::string::npos)
      << refused.err;

  const std::vector<std::string> long_run{"--set",   "steps=120", "--set", "checkpoint_every=5",
                                          "--nproc", "2"};
  test::Proc p = test::spawn_cli(train_args(cfg, dir / "stopped", long_run), dir, {}, "stopped_");
  wait_for_file(dir / "stopped/checkpoint.bin");
  // Ctrl-Z and fg (SIGTSTP, SIGCONT to the launcher's group, which the ranks are not in): the
  // launcher passes each on, so the ranks pause and go on with it.
  ::kill(-p.pid, SIGTSTP);
  EXPECT_EQ(test::wait_for_stopped(p.pid, true), "TTT");
  ::kill(-p.pid, SIGCONT);
  const std::string going_on = test::wait_for_stopped(p.pid, false);
  EXPECT_EQ(going_on.find('T'), std::string::npos) << going_on;
  ::kill(-p.pid, SIGINT);  // Ctrl-C: passed on once, so the ranks stop after a checkpoint
  EXPECT_EQ(test::wait_cli(p), 130) << test::read_text(p.err_file);
  const std::string err = test::read_text(p.err_file);
  EXPECT_NE(err.find("stopped by signal 2 after step"), std::string::npos) << err;
  EXPECT_EQ(err.find("error:"), std::string::npos) << err;  // a rank stopped as asked
  const int64_t at = load_checkpoint(dir / "stopped").step;
  EXPECT_GT(at, 0);
  auto resume = train_args(cfg, dir / "stopped", long_run);
  resume.push_back("--resume");
  const auto resumed = test::run_cli(resume, dir);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const auto straight = test::run_cli(train_args(cfg, dir / "straight", long_run), dir);
  ASSERT_EQ(straight.code, 0) << straight.err;
  EXPECT_TRUE(test::read_text(dir / "stopped/checkpoint.bin") ==
              test::read_text(dir / "straight/checkpoint.bin"))
      << "stopped at step " << at;
}

// Two network namespaces joined by a veth pair stand for two hosts: rank 0 on 10.213.x.1, rank 1
// on 10.213.x.2, Gloo bound to each side's interface (GLOO_SOCKET_IFNAME). The run is the
// loopback run, byte for byte.
class Namespaces {
 public:
  Namespaces() {
    const std::string id = std::to_string(::getpid() % 100000);
    a_ = "rca" + id;
    b_ = "rcb" + id;
    subnet_ = "10.213." + std::to_string(::getpid() % 250) + ".";
    const std::string cmds[] = {"ip netns add " + a_,
                                "ip netns add " + b_,
                                "ip link add " + a_ + " type veth peer name " + b_,
                                "ip link set " + a_ + " netns " + a_,
                                "ip link set " + b_ + " netns " + b_,
                                "ip -n " + a_ + " addr add " + subnet_ + "1/24 dev " + a_,
                                "ip -n " + b_ + " addr add " + subnet_ + "2/24 dev " + b_,
                                "ip -n " + a_ + " link set " + a_ + " up",
                                "ip -n " + b_ + " link set " + b_ + " up",
                                "ip -n " + a_ + " link set lo up",
                                "ip -n " + b_ + " link set lo up"};
    for (const auto& c : cmds)
      if (std::system((c + " >/dev/null 2>&1").c_str()) != 0) {
        why_ = "'" + c + "' failed (network namespaces need root and iproute2)";
        return;
      }
  }
  ~Namespaces() {
    (void)std::system(("ip netns del " + a_ + " >/dev/null 2>&1").c_str());
    (void)std::system(("ip netns del " + b_ + " >/dev/null 2>&1").c_str());
  }
  const std::string& why_not() const { return why_; }
  std::string host(int rank) const { return rank == 0 ? a_ : b_; }
  std::string addr(int rank) const { return subnet_ + (rank == 0 ? "1" : "2"); }

 private:
  std::string a_, b_, subnet_, why_;
};

TEST(DistributedHosts, TwoNamespacesOverVethTrainAsLoopback) {
  Namespaces ns;
  if (!ns.why_not().empty()) GTEST_SKIP() << ns.why_not();
  TempDir dir;
  const std::string cfg = dir / "c.toml";
  test::write_text(cfg, test::tiny_mqar_toml());
  const std::vector<std::string> run{"--set",          "steps=20", "--set", "checkpoint_every=10",
                                     "--dist-timeout", "60"};
  auto loop_args = train_args(cfg, dir / "loopback", run);
  loop_args.insert(loop_args.end(), {"--nproc", "2"});
  const auto loop = test::run_cli(loop_args, dir);
  ASSERT_EQ(loop.code, 0) << loop.err;

  std::vector<test::Proc> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(test::spawn_cli(
        train_args(cfg, dir / "hosts", run), dir,
        {"RANK=" + std::to_string(r), "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
         "MASTER_ADDR=" + ns.addr(0), "MASTER_PORT=29517", "GLOO_SOCKET_IFNAME=" + ns.host(r)},
        "rank" + std::to_string(r) + "_", {"ip", "netns", "exec", ns.host(r)}));
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(test::wait_cli(ranks[r]), 0) << test::read_text(ranks[r].err_file);
  EXPECT_EQ(losses(dir / "hosts/metrics.jsonl"), losses(dir / "loopback/metrics.jsonl"));
  EXPECT_TRUE(test::read_text(dir / "hosts/checkpoint.bin") ==
              test::read_text(dir / "loopback/checkpoint.bin"));
}

// How a fault test's ranks meet: at a store that rank 0 serves, or at one served here (as by
// torchrun's agent or --nproc).
enum class StoreAt { kRank0, kLauncher };

// Ranks started as torchrun would start them; once a checkpoint exists one rank is killed
// (SIGKILL, the writer: it may die inside a checkpoint write) or stopped (SIGSTOP, a hang). The
// other fails within the timeout plus 5 s, exit 1, with one line that names the victim, and the
// folder's checkpoint loads. `names` is how it names it.
void fault(int victim, int signal, int timeout_s, StoreAt at, const std::string& names) {
  TempDir dir;
  const std::string cfg = dir / "c.toml";
  test::write_text(cfg, test::tiny_mqar_toml());
  const std::vector<std::string> run{"--set",          "steps=1000000",
                                     "--set",          "checkpoint_every=3",
                                     "--dist-timeout", std::to_string(timeout_s)};
  std::optional<HeldPort> port;
  std::optional<RunStore> store;
  if (at == StoreAt::kRank0)
    port.emplace(true);
  else
    store.emplace(2, std::chrono::seconds(60));
  std::vector<test::Proc> ranks;
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> env{"RANK=" + std::to_string(r), "WORLD_SIZE=2", "LOCAL_RANK=0",
                                 "LOCAL_WORLD_SIZE=1"};
    for (const auto& e : port ? port->env() : store->env()) env.push_back(e);
    ranks.push_back(test::spawn_cli(train_args(cfg, dir / "run", run), dir, env,
                                    "rank" + std::to_string(r) + "_"));
  }
  wait_for_file(dir / "run/checkpoint.bin");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(ranks[victim].pid, signal);
  const auto& other = ranks[1 - victim];
  const int code = wait_for(other, std::chrono::seconds(timeout_s + 5));
  if (code == -1) ::kill(other.pid, SIGKILL);
  const std::string err = test::read_text(other.err_file);
  EXPECT_EQ(code, 1) << "rank " << 1 - victim << " not done within " << timeout_s + 5
                     << " s: " << err;
  // rank 0 prints its progress on stderr too: the error is one line, the last
  const std::string who = "error: rank " + std::to_string(1 - victim) + " of 2: " + names + ": ";
  const size_t line = err.find("error: ");
  EXPECT_EQ(err.find(who), line) << err;
  EXPECT_TRUE(line != std::string::npos && err.find('\n', line) == err.size() - 1) << err;
  ::kill(ranks[victim].pid, SIGKILL);
  test::wait_cli(ranks[victim]);
  if (code == -1) test::wait_cli(other);
  const Restored r = restore(dir / "run");
  EXPECT_GT(r.step, 0);
  EXPECT_EQ(load_checkpoint(dir / "run").world_size, 2);
}

TEST(DistributedFault, KilledWriterMakesTheOtherRankFail) {
  fault(0, SIGKILL, 20, StoreAt::kRank0,
        "rank 0 died or hung (the store it serves cannot be reached)");
}

TEST(DistributedFault, KilledWriterAtALaunchersStoreIsNamed) {
  fault(0, SIGKILL, 20, StoreAt::kLauncher,
        "rank 0 died or hung (no word from it within 2 s of the failure)");
}

TEST(DistributedFault, HungRankMakesTheOtherFailAfterTheTimeout) {
  fault(1, SIGSTOP, 3, StoreAt::kRank0,
        "rank 1 died or hung (no word from it within 2 s of the failure)");
}

}  // namespace
}  // namespace recall
