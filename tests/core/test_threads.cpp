// The default thread count: the cgroup v2 cpu.max quota, and OMP_NUM_THREADS first.
#include <gtest/gtest.h>

#include <cstdlib>

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

}  // namespace
}  // namespace recall
