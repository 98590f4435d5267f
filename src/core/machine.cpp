#include "recall/core/machine.h"

#include <sys/resource.h>
#include <torch/torch.h>

#include <chrono>

#include "recall/core/device.h"

namespace recall {

double measure_gemm_gflops(int iters, int repeats, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  const int64_t n = 1024;
  const auto opts = torch::TensorOptions().device(device);
  auto a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts),
       c = torch::empty({n, n}, opts);
  for (int i = 0; i < 3; ++i) torch::mm_out(c, a, b);
  synchronize(device);
  double best = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) torch::mm_out(c, a, b);
    synchronize(device);
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
