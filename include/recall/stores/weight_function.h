// Recall weight functions (docs/science.md §1). A weight-function store recalls
//   f(x) = sum_i sigma(k_i . x) v_i
// and each kind below is one sigma. These are the same functions as an MLP's activation (relu,
// relu^p, swiglu with shared gate and input) and softmax attention's unnormalised weight exp(beta
// s).
#pragma once
#include <string>

#include "recall/core/torch.h"

namespace recall {

enum class WeightKind {
  kLinear,     // s                                  (outer-product / Hebbian recall)
  kReluPow,    // max(0, s)^p, p >= 1 (p = 1 is relu, 2 squared ReLU, 3 cubic)
  kSwiglu,     // s * swish(s) = s^2 sigmoid(s)
  kExpSeries,  // sum_{j<n} (beta s)^j / j!, n >= 1 terms
  kSoftmax,    // exp(beta s); normalisation cancels in the ISR
};

struct WeightFunction {
  WeightKind kind = WeightKind::kLinear;
  int p = 1;          // kReluPow
  int n = 2;          // kExpSeries
  double beta = 8.0;  // kExpSeries, kSoftmax

  // Throws std::invalid_argument naming p, n or beta and the accepted range.
  void validate() const;
  // sigma(s), elementwise, in the dtype of s.
  torch::Tensor operator()(const torch::Tensor& s) const;
  // sigma(s) for one double (quadrature).
  double operator()(double s) const;
};

WeightFunction relu_pow(int p);
WeightFunction exp_series(int n, double beta);
WeightFunction softmax_weight(double beta);

}  // namespace recall
