#include "recall/stores/weight_function.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "recall/core/error.h"

namespace recall {

void WeightFunction::validate() const {
  if (kind == WeightKind::kReluPow)
    check_arg(p >= 1, fmt::format("p = {}: the relu power must be an integer >= 1", p));
  if (kind == WeightKind::kExpSeries)
    check_arg(n >= 1, fmt::format("n = {}: the exp series needs n >= 1 terms", n));
  if (kind == WeightKind::kExpSeries || kind == WeightKind::kSoftmax)
    check_arg(std::isfinite(beta) && beta > 0,
              fmt::format("beta = {}: the sharpness must be finite and > 0", beta));
  // The probe sums the series in float32, by Horner, and multiplies by the reciprocal of its value
  // at s = 1: n times that value must stay within float32's range and the reciprocal a normal
  // float32 (denormals are flushed to zero); past them every ISR is NaN.
  if (kind == WeightKind::kExpSeries)
    check_arg(n * (*this)(1.0) <= 1 / std::numeric_limits<float>::min(),
              fmt::format("beta = {}: exp{} at s = 1 is {:.3g}, past float32's range; use a "
                          "smaller beta or fewer terms",
                          beta, n, (*this)(1.0)));
}

torch::Tensor WeightFunction::operator()(const torch::Tensor& s) const {
  switch (kind) {
    case WeightKind::kLinear:
      return s;
    case WeightKind::kReluPow: {
      auto r = torch::relu(s);
      return p == 1 ? r : (p == 2 ? r * r : r.pow(p));
    }
    case WeightKind::kSwiglu:
      return s * s * torch::sigmoid(s);
    case WeightKind::kExpSeries: {
      // Horner: 1 + bs (1 + bs/2 (1 + bs/3 (...)))
      auto bs = beta * s;
      auto acc = torch::ones_like(s);
      for (int j = n - 1; j >= 1; --j) acc = 1.0 + acc * bs / static_cast<double>(j);
      return acc;
    }
    case WeightKind::kSoftmax:
      return torch::exp(beta * s);
  }
  return s;
}

double WeightFunction::operator()(double s) const {
  switch (kind) {
    case WeightKind::kLinear:
      return s;
    case WeightKind::kReluPow:
      return s > 0 ? std::pow(s, p) : 0.0;
    case WeightKind::kSwiglu:
      return s * s / (1.0 + std::exp(-s));
    case WeightKind::kExpSeries: {
      double acc = 1.0, bs = beta * s;
      for (int j = n - 1; j >= 1; --j) acc = 1.0 + acc * bs / j;
      return acc;
    }
    case WeightKind::kSoftmax:
      return std::exp(beta * s);
  }
  return s;
}

WeightFunction relu_pow(int p) {
  WeightFunction f{WeightKind::kReluPow, p};
  f.validate();
  return f;
}
WeightFunction exp_series(int n, double beta) {
  WeightFunction f{WeightKind::kExpSeries, 1, n, beta};
  f.validate();
  return f;
}
WeightFunction softmax_weight(double beta) {
  WeightFunction f{WeightKind::kSoftmax, 1, 1, beta};
  f.validate();
  return f;
}

}  // namespace recall
