#pragma once
#include <ATen/Parallel.h>

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
