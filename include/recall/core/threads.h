#pragma once
#include <ATen/Parallel.h>

#include <cstdint>
#include <functional>
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
// Runs fn(item, worker) for item in [0, n) on get_num_threads() workers (the calling thread and
// plain threads kept for these calls, asleep between them; worker in [0, workers)), each claiming
// the next item when it is free. A worker the OS delays (a busy neighbour on its core) holds back
// at most the one item it is on. The workers are not OpenMP threads and wait on a condition
// variable, not spinning: with libgomp's default spinning barriers, regions of torch ops on a
// machine whose cores are taken elsewhere ran several times slower than on one thread. fn should be
// plain loops and kernels (OpenMP inside them runs on one thread): the first parallel torch op on a
// fresh worker runs torch's per-thread set-up, which sets that thread's OpenMP count back to
// torch's and rebuilds torch's shared thread pool, whose new threads spin; the probe lost half its
// time to that. Items must not depend on which worker runs them. The first exception thrown is
// rethrown here.
void parallel_claim(int64_t n, const std::function<void(int64_t item, int worker)>& fn);
// The same on `workers` workers (at most n), whatever torch's thread count: the trainer's own
// share of a step runs torch single-threaded beside its data-parallel workers, and spreads its
// loops over as many workers as they are.
void parallel_claim(int64_t n, int workers,
                    const std::function<void(int64_t item, int worker)>& fn);

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
