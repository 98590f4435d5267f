#include "recall/stores/isr.h"

#include <fmt/format.h>

#include "recall/core/error.h"

namespace recall {

torch::Tensor self_recall_isr(const torch::Tensor& weights, const torch::Tensor& values,
                              const torch::Tensor& value_norms) {
  check_arg(weights.dim() == 2 && values.dim() == 2 && weights.size(0) <= weights.size(1) &&
                weights.size(1) == values.size(0),
            fmt::format("isr: weights {} and values {} must be (Q, M) and (M, d_v) with Q <= M",
                        c10::str(weights.sizes()), c10::str(values.sizes())));
  const int64_t Q = weights.size(0);
  auto idx = torch::arange(Q, weights.options().dtype(torch::kLong));
  auto w_jj = weights.index({idx, idx}).abs();  // (Q,) the signal's weight
  auto rest = weights.index_put({idx, idx}, torch::zeros({}, weights.options()));  // W, W_jj = 0
  auto interference = rest.mm(values).norm(2, 1);  // (Q,) || sum_{i != j} W_ji v_i ||
  auto norms = value_norms.defined() ? value_norms : values.narrow(0, 0, Q).norm(2, 1);
  return interference / (w_jj * norms);
}

}  // namespace recall
