#include "recall/core/threads.h"

#include <sched.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

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
