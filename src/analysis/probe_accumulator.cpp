#include "recall/analysis/probe_accumulator.h"

#include <algorithm>
#include <cmath>

namespace recall {

void ProbeAccumulator::start(int64_t d_v, const torch::Device& device) {
  const auto opts = torch::TensorOptions().device(device);
  sums = torch::zeros({q, d_v}, opts);
  signal = torch::zeros({q}, opts);
  isr.clear();
  for (int64_t M : snapshots) isr[M].resize(static_cast<size_t>(std::min(q, M)));
}

void ProbeAccumulator::snapshot(int64_t M) {
  const int64_t n = std::min(q, M);
  auto r = (sums.slice(0, 0, n).norm(2, 1) / signal.slice(0, 0, n).abs())
               .to(torch::kCPU, torch::kFloat64)
               .contiguous();
  isr[M].assign(r.data_ptr<double>(), r.data_ptr<double>() + n);
}

void ProbeAccumulator::snapshot_rows(int64_t M, int64_t r0, int64_t r1) {
  const int64_t d_v = sums.size(1);
  const float* A = sums.data_ptr<float>();
  const float* sig = signal.data_ptr<float>();
  auto& out = isr.at(M);
  for (int64_t j = r0; j < std::min({r1, q, M}); ++j) {
    double norm2 = 0;
    for (int64_t c = 0; c < d_v; ++c)
      norm2 += static_cast<double>(A[j * d_v + c]) * static_cast<double>(A[j * d_v + c]);
    out[static_cast<size_t>(j)] = std::sqrt(norm2) / std::abs(static_cast<double>(sig[j]));
  }
}

}  // namespace recall
