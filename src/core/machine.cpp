#include "recall/core/machine.h"

#include <ATen/CPUGeneratorImpl.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <chrono>

namespace recall {

double measure_gemm_gflops(int iters, int repeats) {
  torch::NoGradGuard no_grad;
  const int64_t n = 1024;
  // a generator of its own: measuring must not move torch's default one, which checkpoints hold
  auto gen = at::detail::createCPUGenerator(0);
  auto a = torch::randn({n, n}, gen), b = torch::randn({n, n}, gen), c = torch::empty({n, n});
  for (int i = 0; i < 3; ++i) torch::mm_out(c, a, b);
  double best = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) torch::mm_out(c, a, b);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n * iters / s / 1e9);
  }
  return best;
}

double peak_rss_mib() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace recall
