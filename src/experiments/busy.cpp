#include "recall/experiments/busy.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

#include "recall/experiments/bench_train.h"
#include "recall/train/train_config.h"

namespace recall {

// A fork, not spawn() (recall/core/spawn.h): the child runs no program, only a spin loop, and must
// set PR_SET_PDEATHSIG itself; spawning /proc/self/exe instead would need a spin entry point in
// every program that links core (the CLI and each test program).
BusyNeighbours::BusyNeighbours(int n) {
  const pid_t parent = ::getpid();
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      this->~BusyNeighbours();
      throw std::runtime_error("fork failed: cannot start a busy neighbour");
    }
    if (pid == 0) {  // the child touches nothing of the parent's: it spins until killed
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // and dies with the parent, however that ends
      if (::getppid() != parent) ::_exit(0);
      volatile unsigned long x = 0;
      for (;;) x = x + 1;
    }
    pids_.push_back(pid);
  }
}

BusyNeighbours::~BusyNeighbours() {
  for (pid_t pid : pids_) ::kill(pid, SIGKILL);
  for (pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
  pids_.clear();
}

BusyRounds run_busy_rounds(const ProbePlan& plan, double first_idle_seconds, int busy,
                           int64_t train_steps, int rounds) {
  const int64_t steps = train_steps > 0 ? train_steps + 2 : 0;
  const TrainConfig train = train_config_from_file("bench-gpt");
  BusyRounds r;
  for (int round = 0; round < rounds; ++round) {
    r.idle_seconds.push_back(round == 0 ? first_idle_seconds : run_probe(plan).seconds);
    {
      BusyNeighbours neighbours(busy);
      r.busy_seconds.push_back(run_probe(plan).seconds);
    }
    r.slowdowns.push_back(r.busy_seconds.back() / r.idle_seconds.back());
    if (steps == 0) continue;
    r.idle_tokens_per_s.push_back(bench_train(train, steps, plan.config.device).tokens_per_s);
    {
      BusyNeighbours neighbours(busy);
      r.busy_tokens_per_s.push_back(bench_train(train, steps, plan.config.device).tokens_per_s);
    }
    r.train_slowdowns.push_back(r.idle_tokens_per_s.back() / r.busy_tokens_per_s.back());
  }
  return r;
}

}  // namespace recall
