#include "recall/core/busy.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

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

}  // namespace recall
