#include "recall/stores/delta.h"

#include <fmt/format.h>

#include "recall/core/error.h"

namespace recall {

DeltaStoreImpl::DeltaStoreImpl(DeltaStoreOptions options_) : options(options_) {
  reset();
}

void DeltaStoreImpl::reset() {
  detail::check_dims(options.d_k(), options.d_v());
  check_arg(options.rate() > 0 && options.rate() < 2,
            fmt::format("rate = {}: the delta-rule step must be in (0, 2)", options.rate()));
  memory = KeyValueMemory{options.d_k(), options.d_v(), {}, {}};
  state = torch::zeros({options.d_k(), options.d_v()});  // derived from the memories
}

void DeltaStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  memory.append(keys, values);
  if (memory.size() == keys.size(0)) state = state.to(keys.scalar_type());
  const double b = options.rate();
  for (int64_t i = 0; i < keys.size(0); ++i) {
    auto k = keys[i].unsqueeze(1);                        // (d_k, 1)
    auto err = values[i].unsqueeze(0) - k.t().mm(state);  // (1, d_v): v - S^T k
    state = state + b * k.mm(err);
  }
}

torch::Tensor DeltaStoreImpl::recall(const torch::Tensor& queries) {
  detail::check_queries(queries, options.d_k());
  return queries.mm(state);
}

torch::Tensor DeltaStoreImpl::recall_weights(const torch::Tensor& queries) {
  detail::check_queries(queries, options.d_k());
  const auto& K = memory.keys;
  const int64_t M = K.size(0);
  const double b = options.rate();
  // T = (I + b tril(K K^T, -1))^{-1} b, a unit lower-triangular solve: (M, M)
  auto A = torch::eye(M, K.options()) + b * torch::tril(K.mm(K.t()), -1);
  auto T = torch::linalg_solve_triangular(A, b * torch::eye(M, K.options()), /*upper=*/false,
                                          /*left=*/true, /*unitriangular=*/true);
  return queries.mm(K.t()).mm(T);  // (Q, M)
}

}  // namespace recall
