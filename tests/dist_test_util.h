// Helpers for the tests that run the real binary as several processes (torchrun's ranks, and
// --nproc's launcher): a training command line for a long run, and waits with a bound.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "train_test_util.h"

namespace recall::test {

// `recall train` of `cfg` into `out` on one thread, without evaluation, then `extra`.
inline std::vector<std::string> train_args(const std::string& cfg, const std::string& out,
                                           const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a{"train",     "--config", cfg,     "--out",       out,
                             "--threads", "1",        "--set", "eval_every=0"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// Waits for p up to `limit`; -1 when it is still running then.
inline int wait_for(const Proc& p, std::chrono::steady_clock::duration limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int status = 0;
    if (::waitpid(p.pid, &status, WNOHANG) == p.pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

inline void wait_for_file(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(path) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
}

}  // namespace recall::test
