#include "recall/stores/outer_product.h"

namespace recall {

OuterProductStoreImpl::OuterProductStoreImpl(OuterProductStoreOptions options_)
    : options(options_) {
  reset();
}

void OuterProductStoreImpl::reset() {
  detail::check_dims(options.d_k(), options.d_v());
  stored_keys = register_buffer("keys", torch::zeros({0, options.d_k()}));
  stored_values = register_buffer("values", torch::zeros({0, options.d_v()}));
  weight = register_buffer("weight", torch::zeros({options.d_v(), options.d_k()}));
}

void OuterProductStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  detail::check_write(stored_keys, keys, values, options.d_k(), options.d_v());
  torch::NoGradGuard no_grad;
  const auto W = size() == 0 ? weight.to(keys.scalar_type()) : weight;
  weight.set_data(W + values.t().mm(keys));  // sum of v k^T: (d_v, d_k)
  detail::append_rows(stored_keys, keys);
  detail::append_rows(stored_values, values);
}

torch::Tensor OuterProductStoreImpl::forward(const torch::Tensor& x) {
  detail::check_queries(x, options.d_k());
  return x.mm(weight.t());
}

torch::Tensor OuterProductStoreImpl::recall_weights(const torch::Tensor& x) {
  detail::check_queries(x, options.d_k());
  return x.mm(stored_keys.t());  // (Q, M)
}

}  // namespace recall
