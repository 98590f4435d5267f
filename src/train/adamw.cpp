#include "recall/train/adamw.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <cmath>

#include "recall/core/error.h"

namespace recall {

FusedAdamW::FusedAdamW(std::vector<torch::Tensor> params, FusedAdamWOptions options_)
    : options(options_), params_(std::move(params)) {
  check_arg(options.lr() >= 0, fmt::format("lr = {}: must be >= 0", options.lr()));
  check_arg(
      options.beta1() >= 0 && options.beta1() < 1 && options.beta2() >= 0 && options.beta2() < 1,
      fmt::format("betas = ({}, {}): each must be in [0, 1)", options.beta1(), options.beta2()));
  check_arg(options.eps() > 0, fmt::format("eps = {}: must be > 0", options.eps()));
  int64_t total = 0;
  for (const auto& p : params_) {
    check_arg(p.scalar_type() == torch::kFloat32 && p.device().is_cpu() && p.is_contiguous(),
              "FusedAdamW: parameters must be contiguous float32 CPU tensors");
    offsets_.push_back(total);
    total += p.numel();
  }
  offsets_.push_back(total);
  exp_avg_ = torch::zeros({total});
  exp_avg_sq_ = torch::zeros({total});
}

void FusedAdamW::zero_grad() {
  for (auto& p : params_) p.mutable_grad().reset();
}

void FusedAdamW::step() {
  torch::NoGradGuard no_grad;
  ++step_;
  const double b1 = options.beta1(), b2 = options.beta2();
  const float decay = static_cast<float>(1.0 - options.lr() * options.weight_decay());
  const float step_size = static_cast<float>(options.lr() / (1.0 - std::pow(b1, step_)));
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(b2, step_)));
  const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
  const float eps = static_cast<float>(options.eps());
  std::vector<float*> grads(params_.size(), nullptr);
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& g = params_[i].grad();
    if (!g.defined()) continue;
    check_arg(g.is_contiguous() && g.scalar_type() == torch::kFloat32,
              "FusedAdamW: gradients must be contiguous float32");
    grads[i] = g.data_ptr<float>();
  }
  float* m = exp_avg_.data_ptr<float>();
  float* v = exp_avg_sq_.data_ptr<float>();
  // One parallel loop over the flat element range; each chunk walks the parameters it overlaps.
  at::parallel_for(0, offsets_.back(), 1 << 14, [&](int64_t begin, int64_t end) {
    size_t i = std::upper_bound(offsets_.begin(), offsets_.end(), begin) - offsets_.begin() - 1;
    for (; i < params_.size() && offsets_[i] < end; ++i) {
      if (!grads[i]) continue;
      const int64_t lo = std::max(begin, offsets_[i]), hi = std::min(end, offsets_[i + 1]);
      float* p = params_[i].data_ptr<float>();
      const float* g = grads[i];
      float* mi = m + offsets_[i];
      float* vi = v + offsets_[i];
      for (int64_t j = lo - offsets_[i]; j < hi - offsets_[i]; ++j) {
        mi[j] = fb1 * mi[j] + (1.0f - fb1) * g[j];
        vi[j] = fb2 * vi[j] + (1.0f - fb2) * g[j] * g[j];
        p[j] = p[j] * decay - step_size * mi[j] / (std::sqrt(vi[j]) * inv_sqrt_bc2 + eps);
      }
    }
  });
}

}  // namespace recall
