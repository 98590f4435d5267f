// AdamW in one pass: torch::optim::AdamW (decoupled weight decay, bias-corrected moments, no
// amsgrad) whose step updates every parameter of every group inside a single parallel loop over
// all elements instead of ~8 tensor ops per parameter. On small models the per-op overhead (and,
// with several threads, one fork/join per op) dominates the optimiser; this removes it.
//
// Parameter groups, their options (lr, betas, eps, weight_decay) and the per-parameter state
// (AdamWParamState: step, exp_avg, exp_avg_sq) are torch's own. On a non-CPU device and under
// RECALL_KERNELS=reference (fast_kernels in recall/ops/kernels.h) step() is AdamW::step on that
// same state.
#pragma once
#include <vector>

#include "recall/core/torch.h"

namespace recall {

class FusedAdamW : public torch::optim::AdamW {
 public:
  // Parameters: contiguous float32 tensors on one device. Throws std::invalid_argument naming the
  // value for a bad parameter or option (lr < 0, a beta outside [0, 1), eps <= 0, weight_decay < 0,
  // amsgrad).
  explicit FusedAdamW(std::vector<torch::optim::OptimizerParamGroup> groups,
                      torch::optim::AdamWOptions defaults = {});
  explicit FusedAdamW(std::vector<torch::Tensor> params, torch::optim::AdamWOptions defaults = {});

  // Per parameter with a gradient, with t its step count after this step:
  //   p <- p (1 - lr wd);  m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
  //   p <- p - lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
  // Parameters without a gradient are left alone (no state is created for them).
  torch::Tensor step(LossClosure closure = nullptr) override;

  // The state keyed by (group, index) rather than by tensor address as torch's AdamW::save does,
  // so that the same state gives the same bytes in any process (same seed, same checkpoint).
  // load() also reads torch's own AdamW format. Throws std::invalid_argument when the archive's
  // groups do not have this optimizer's sizes.
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

  // Sets every gradient to none (undefined), so that the next backward writes instead of adding.
  void zero_grad();

  // Every gradient times `scale`, as g.mul_(scale) makes it (a gradient clip's coefficient). On
  // the fused path the next step() multiplies each gradient as it reads it, with the same float
  // rounding, rather than in a pass of its own; the gradients themselves stay as they are. On the
  // reference path (AdamW::step) they are multiplied now. A scale of 1 changes nothing.
  void scale_gradients(float scale);

  // Where the fused step's loop runs: on torch's intra-op threads (0, the default), or on n
  // workers of parallel_claim (recall/core/threads.h), which sleep rather than spin between
  // calls: the trainer runs torch single-threaded beside its data-parallel workers and gives the
  // step as many. The bits are the same either way (each element is updated alone).
  void set_workers(int n) { workers_ = n; }

 private:
  void multiply_gradients(float scale);  // g.mul_(scale) for every gradient
  c10::Device device_{torch::kCPU};      // the parameters'
  float grad_scale_ = 1.0f;              // for the next fused step
  int workers_ = 0;                      // set_workers
};

}  // namespace recall
