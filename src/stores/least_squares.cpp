#include "recall/stores/least_squares.h"

namespace recall {

LeastSquaresStoreImpl::LeastSquaresStoreImpl(LeastSquaresStoreOptions options_)
    : options(options_) {
  reset();
}

void LeastSquaresStoreImpl::reset() {
  detail::check_dims(options.d_k(), options.d_v());
  stored_keys = register_buffer("keys", torch::zeros({0, options.d_k()}));
  stored_values = register_buffer("values", torch::zeros({0, options.d_v()}));
  pinv_ = torch::Tensor();
}

void LeastSquaresStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  detail::check_write(stored_keys, keys, values, options.d_k(), options.d_v());
  detail::append_rows(stored_keys, keys);
  detail::append_rows(stored_values, values);
  pinv_ = torch::Tensor();
}

torch::Tensor LeastSquaresStoreImpl::pinv_keys() {
  // w(x) = (K^T)^+ x, so W(X) = X ((K^T)^+)^T = X K^+ with K^+: (d_k, M). The cache is dropped
  // when the keys moved (to()) or grew.
  if (!pinv_.defined() || pinv_.size(1) != size() || pinv_.device() != stored_keys.device())
    pinv_ = torch::linalg_pinv(stored_keys.to(torch::kFloat64), /*rcond=*/1e-15);
  return pinv_;
}

torch::Tensor LeastSquaresStoreImpl::recall_weights(const torch::Tensor& x) {
  detail::check_queries(x, options.d_k());
  return x.to(torch::kFloat64).mm(pinv_keys()).to(x.scalar_type());  // (Q, M)
}

torch::Tensor LeastSquaresStoreImpl::forward(const torch::Tensor& x) {
  return recall_weights(x).mm(stored_values.to(x.scalar_type()));
}

}  // namespace recall
