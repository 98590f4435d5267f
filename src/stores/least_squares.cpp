#include "recall/stores/least_squares.h"

namespace recall {

LeastSquaresStoreImpl::LeastSquaresStoreImpl(LeastSquaresStoreOptions options_)
    : options(options_) {
  reset();
}

void LeastSquaresStoreImpl::reset() {
  detail::check_dims(options.d_k(), options.d_v());
  memory = KeyValueMemory{options.d_k(), options.d_v(), {}, {}};
  pinv_ = torch::Tensor();
}

void LeastSquaresStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  memory.append(keys, values);
  pinv_ = torch::Tensor();
}

torch::Tensor LeastSquaresStoreImpl::pinv_keys() {
  // w(x) = (K^T)^+ x, so W(X) = X ((K^T)^+)^T = X K^+ with K^+: (d_k, M).
  if (!pinv_.defined()) pinv_ = torch::linalg::pinv(memory.keys.to(torch::kFloat64));
  return pinv_;
}

torch::Tensor LeastSquaresStoreImpl::recall_weights(const torch::Tensor& queries) {
  detail::check_queries(queries, options.d_k());
  return queries.to(torch::kFloat64).mm(pinv_keys()).to(queries.scalar_type());  // (Q, M)
}

torch::Tensor LeastSquaresStoreImpl::recall(const torch::Tensor& queries) {
  return recall_weights(queries).mm(memory.values);
}

}  // namespace recall
