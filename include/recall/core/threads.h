#pragma once
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

namespace recall {
// Sets torch's intra-op threads; n <= 0 means default_threads(). Torch here defaults to 1 thread.
// Also flushes denormal floats to zero for this thread and the threads it starts: call it first.
// Returns the number set.
int set_threads(int n);
// The default thread count: OMP_NUM_THREADS when it is set to a positive number, else the CPUs
// this process may run on, capped by the cgroup CPU quota (/sys/fs/cgroup/cpu.max).
int default_threads();
// The thread count a cgroup v2 cpu.max line allows ("200000 100000": 2; "150000 100000": 2, the
// quota rounded up), or 0 for no quota ("max 100000") or an unreadable line.
int cpu_quota_threads(const std::string& cpu_max);
// Runs fn(i) for i in [0, n) on torch's threads, each thread claiming the next item when it is
// free, in one parallel region. A thread the OS delays (a busy neighbour on its core) holds back at
// most the one item it is on, where at::parallel_for's equal static shares would hold back a whole
// share; and one region for many items avoids a barrier per small op. Items must not depend on
// which thread runs them.
template <class Fn>
void parallel_claim(int64_t n, const Fn& fn) {
  std::atomic<int64_t> next{0};
  const int64_t workers = std::min<int64_t>(n, at::get_num_threads());
  at::parallel_for(0, workers, 1, [&](int64_t, int64_t) {
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  });
}

// torch's intra-op thread count for a scope.
class TorchThreads {
 public:
  explicit TorchThreads(int n) : saved_(at::get_num_threads()) {
    if (n != saved_) at::set_num_threads(n);
  }
  ~TorchThreads() {
    if (at::get_num_threads() != saved_) at::set_num_threads(saved_);
  }
  TorchThreads(const TorchThreads&) = delete;
  TorchThreads& operator=(const TorchThreads&) = delete;

 private:
  int saved_;
};
}  // namespace recall
