// AdamW in one pass: the same update as torch::optim::AdamW (decoupled weight decay, bias-corrected
// moments, no amsgrad), but every parameter is updated inside a single parallel loop over all
// elements instead of ~8 tensor ops per parameter. On small models the per-op overhead (and, with
// several threads, one fork/join per op) dominates the optimiser; this removes it.
#pragma once
#include <torch/torch.h>

#include <vector>

namespace recall {

struct FusedAdamWOptions {
  explicit FusedAdamWOptions(double lr = 1e-3) : lr_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(double, beta1) = 0.9;
  TORCH_ARG(double, beta2) = 0.999;
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 1e-2;
};

class FusedAdamW {
 public:
  // params: float32 CPU tensors (throws std::invalid_argument otherwise).
  FusedAdamW(std::vector<torch::Tensor> params, FusedAdamWOptions options);
  // One update of every parameter that has a gradient.
  void step();
  // Sets every gradient to none (undefined), so that the next backward writes instead of adding.
  void zero_grad();
  FusedAdamWOptions options;  // lr may be changed between steps (schedules)

 private:
  std::vector<torch::Tensor> params_;
  std::vector<int64_t> offsets_;  // start of each parameter in the flat moment buffers
  torch::Tensor exp_avg_, exp_avg_sq_;
  int64_t step_ = 0;
};

}  // namespace recall
