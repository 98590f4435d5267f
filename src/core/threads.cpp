#include "recall/core/threads.h"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "recall/core/torch.h"

namespace recall {

int cpu_quota_threads(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || *end != '\0' || !(q > 0)) return 0;
  return static_cast<int>(std::ceil(q / period));
}

int default_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(env);  // "4" or OpenMP's nested list "4,2": the first level
    if (n > 0) return n;
  }
  int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) n = CPU_COUNT(&set);
  std::ifstream cpu_max("/sys/fs/cgroup/cpu.max");
  std::string line;
  if (std::getline(cpu_max, line))
    if (const int quota = cpu_quota_threads(line); quota > 0) n = std::min(n, quota);
  return std::max(1, n);
}

namespace {
// The OpenMP runtime torch runs on, looked up in the process (Debian's libgomp, or the one a
// LibTorch build brings); null when there is none.
using SetThreads = void (*)(int);
using GetThreads = int (*)();
SetThreads omp_set() {
  static const auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return fn;
}
GetThreads omp_get() {
  static const auto fn = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return fn;
}
// MKL's per-thread count (where MKL is in the process, as in PyPI's torch): torch sets it on its
// own thread only, so on a new thread MKL would start a team of its default size. Returns the
// thread's previous setting (0 for none).
using SetThreadsLocal = int (*)(int);
SetThreadsLocal mkl_set_local() {
  static const auto fn =
      reinterpret_cast<SetThreadsLocal>(dlsym(RTLD_DEFAULT, "MKL_Set_Num_Threads_Local"));
  return fn;
}
}  // namespace

namespace {

// The threads parallel_claim runs on besides the caller, kept between calls: starting and joining
// threads for every call cost about 0.13 ms a call (0.65 s of the probe when it ran 5,000 regions).
// They sleep on a condition variable between regions (no spinning: a busy neighbour keeps its
// core). One region at a time; a call while one runs (from another thread, or from inside an item)
// gets threads of its own, as before. Never destroyed: its threads sleep through the process's
// exit.
class ClaimPool {
 public:
  static ClaimPool& instance() {
    static auto* pool = new ClaimPool;
    return *pool;
  }
  std::mutex region;  // held by the call whose region the pool runs

  // Runs work(1) .. work(helpers) on the pool's threads while the caller runs its own share;
  // wait() returns once they all have.
  void start(int helpers, const std::function<void(int)>& work) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (static_cast<int>(threads_.size()) < helpers) {
      const int index = static_cast<int>(threads_.size());
      threads_.emplace_back([this, index] { loop(index); });
      threads_.back().detach();
    }
    work_ = &work;
    helpers_ = helpers;
    running_ = helpers;
    ++generation_;
    wake_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return running_ == 0; });
    work_ = nullptr;
  }

 private:
  void loop(int index) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= helpers_) continue;  // a region with fewer workers than the pool has
      const auto* work = work_;
      lock.unlock();
      (*work)(index + 1);
      lock.lock();
      if (--running_ == 0) done_.notify_one();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* work_ = nullptr;
  int helpers_ = 0, running_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace

void parallel_claim(int64_t n, const std::function<void(int64_t, int)>& fn) {
  parallel_claim(n, at::get_num_threads(), fn);
}

void parallel_claim(int64_t n, int threads, const std::function<void(int64_t, int)>& fn) {
  const int workers = static_cast<int>(std::min<int64_t>(n, threads));
  if (workers <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  // The caller's floating-point environment (denormals flushed to zero, set_threads) on every
  // worker, whenever its thread was started.
  fenv_t env;
  fegetenv(&env);
  const std::function<void(int)> work = [&](int worker) {
    if (worker > 0) fesetenv(&env);
    // this thread's torch ops on one thread: OpenMP's thread count is per thread, and torch's
    // parallel_for reads it
    const int saved = omp_get() && omp_set() ? omp_get()() : 0;
    if (saved > 1) omp_set()(1);
    const int saved_mkl = mkl_set_local() ? mkl_set_local()(1) : 0;
    try {
      for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next.store(n);
    }
    if (saved > 1) omp_set()(saved);
    if (mkl_set_local()) mkl_set_local()(saved_mkl);
  };
  auto& pool = ClaimPool::instance();
  std::unique_lock<std::mutex> region(pool.region, std::try_to_lock);
  if (region.owns_lock()) {
    pool.start(workers - 1, work);
    work(0);
    pool.wait();
  } else {
    std::vector<std::thread> threads;
    for (int w = 1; w < workers; ++w) threads.emplace_back(work, w);
    work(0);
    for (auto& t : threads) t.join();
  }
  if (error) std::rethrow_exception(error);
}

int set_threads(int n) {
  if (n <= 0) n = default_threads();
  // Flush denormals to zero on this thread, and so on every thread it starts later (threads
  // inherit the floating-point control word): an attention layer whose softmax gradients decay
  // into the denormal range otherwise runs its GEMMs 4x slower as training goes on.
  at::globalContext().setFlushDenormal(true);
  torch::set_num_threads(n);
  return n;
}

}  // namespace recall
