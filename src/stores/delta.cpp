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
  stored_keys = register_buffer("keys", torch::zeros({0, options.d_k()}));
  stored_values = register_buffer("values", torch::zeros({0, options.d_v()}));
  state = register_buffer("state", torch::zeros({options.d_k(), options.d_v()}));
}

void DeltaStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  detail::check_write(stored_keys, keys, values, options.d_k(), options.d_v());
  torch::NoGradGuard no_grad;
  auto S = size() == 0 ? state.to(keys.scalar_type()) : state.clone();
  const double b = options.rate();
  for (int64_t i = 0; i < keys.size(0); ++i) {
    auto k = keys[i].unsqueeze(1);                    // (d_k, 1)
    auto err = values[i].unsqueeze(0) - k.t().mm(S);  // (1, d_v): v - S^T k
    S += b * k.mm(err);
  }
  state.set_data(S);
  detail::append_rows(stored_keys, keys);
  detail::append_rows(stored_values, values);
}

torch::Tensor DeltaStoreImpl::forward(const torch::Tensor& x) {
  detail::check_queries(x, options.d_k());
  return x.mm(state);
}

torch::Tensor DeltaStoreImpl::recall_weights(const torch::Tensor& x) {
  detail::check_queries(x, options.d_k());
  const auto& K = stored_keys;
  const int64_t M = K.size(0);
  const double b = options.rate();
  // T = (I + b tril(K K^T, -1))^{-1} b, a unit lower-triangular solve: (M, M)
  auto A = torch::eye(M, K.options()) + b * torch::tril(K.mm(K.t()), -1);
  auto T = torch::linalg_solve_triangular(A, b * torch::eye(M, K.options()), /*upper=*/false,
                                          /*left=*/true, /*unitriangular=*/true);
  return x.mm(K.t()).mm(T);  // (Q, M)
}

}  // namespace recall
