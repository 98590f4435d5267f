// The default thread count (the cgroup v2 cpu.max quota, and OMP_NUM_THREADS first), and
// parallel_claim's regions.
#include <gtest/gtest.h>

#include <atomic>
#include <cfenv>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#include "recall/core/threads.h"

namespace recall {
namespace {

TEST(Threads, CpuMaxQuotaRoundsUp) {
  EXPECT_EQ(cpu_quota_threads("200000 100000"), 2);
  EXPECT_EQ(cpu_quota_threads("150000 100000\n"), 2);
  EXPECT_EQ(cpu_quota_threads("50000 100000"), 1);
  EXPECT_EQ(cpu_quota_threads("max 100000"), 0);  // no quota
  EXPECT_EQ(cpu_quota_threads(""), 0);
  EXPECT_EQ(cpu_quota_threads("abc 100000"), 0);
  EXPECT_EQ(cpu_quota_threads("100000 0"), 0);
}

TEST(Threads, OmpNumThreadsComesFirst) {
  const char* saved = std::getenv("OMP_NUM_THREADS");
  const std::string keep = saved ? saved : "";
  setenv("OMP_NUM_THREADS", "7", 1);
  EXPECT_EQ(default_threads(), 7);
  setenv("OMP_NUM_THREADS", "0", 1);  // not a thread count: the CPUs decide
  EXPECT_GE(default_threads(), 1);
  if (saved)
    setenv("OMP_NUM_THREADS", keep.c_str(), 1);
  else
    unsetenv("OMP_NUM_THREADS");
}

// Every item once, each worker's index below the thread count.
TEST(Threads, ParallelClaimRunsEveryItemOnce) {
  TorchThreads three(3);
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    std::atomic<int> bad_worker{0};
    parallel_claim(n, [&](int64_t i, int worker) {
      seen[static_cast<size_t>(i)]++;
      if (worker < 0 || worker >= 3) bad_worker++;
    });
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(seen[static_cast<size_t>(i)].load(), 1) << n << " " << i;
    EXPECT_EQ(bad_worker.load(), 0);
  }
}

// A region started while another runs (from inside an item, or from another thread) runs on
// threads of its own: every item of both, and no deadlock.
TEST(Threads, ParallelClaimNestsAndRunsFromTwoThreads) {
  TorchThreads two(2);
  std::atomic<int64_t> sum{0};
  parallel_claim(
      4, [&](int64_t i, int) { parallel_claim(5, [&](int64_t j, int) { sum += i * 5 + j; }); });
  EXPECT_EQ(sum.load(), 190);  // 0 + 1 + ... + 19
  std::atomic<int64_t> a{0}, b{0};
  std::thread other([&] {
    for (int r = 0; r < 200; ++r) parallel_claim(8, [&](int64_t i, int) { a += i; });
  });
  for (int r = 0; r < 200; ++r) parallel_claim(8, [&](int64_t i, int) { b += i; });
  other.join();
  EXPECT_EQ(a.load(), 200 * 28);
  EXPECT_EQ(b.load(), 200 * 28);
}

// The first exception comes back to the caller, and the next region runs as usual.
TEST(Threads, ParallelClaimRethrowsAndCarriesOn) {
  TorchThreads two(2);
  EXPECT_THROW(parallel_claim(100,
                              [](int64_t i, int) {
                                if (i == 37) throw std::runtime_error("item 37");
                              }),
               std::runtime_error);
  std::atomic<int> n{0};
  parallel_claim(10, [&](int64_t, int) { n++; });
  EXPECT_EQ(n.load(), 10);
}

// The workers compute in the caller's floating-point environment: denormals flushed to zero when
// the caller flushes them (set_threads), kept when it does not, whenever the threads started.
TEST(Threads, ParallelClaimWorkersFlushDenormalsAsTheCaller) {
  TorchThreads two(2);
  fenv_t saved;
  fegetenv(&saved);
  volatile float tiny = 1e-30f;
  for (bool flush : {true, false, true}) {
    at::globalContext().setFlushDenormal(flush);
    std::vector<float> out(64, -1.0f);
    std::atomic<int> on_helper{0};
    // The caller's items wait for a helper's, so a helper computes at least one item however the
    // threads are scheduled (60 s: a helper that never comes fails rather than hangs).
    parallel_claim(64, [&](int64_t i, int worker) {
      out[static_cast<size_t>(i)] = tiny * 1e-10f;
      if (worker > 0) {
        on_helper++;
        return;
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (on_helper.load() == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
    });
    EXPECT_GT(on_helper.load(), 0);
    for (float x : out) {
      if (flush)
        EXPECT_EQ(x, 0.0f);
      else
        EXPECT_GT(x, 0.0f);  // 1e-40, a denormal
    }
  }
  fesetenv(&saved);
}

}  // namespace
}  // namespace recall
