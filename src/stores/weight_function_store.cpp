#include "recall/stores/weight_function_store.h"

namespace recall {

torch::Tensor weight_function_weights(const WeightFunction& w, const torch::Tensor& K,
                                      const torch::Tensor& X) {
  auto s = X.mm(K.t());  // (Q, M) similarities
  if (w.kind == WeightKind::kSoftmax) return torch::softmax(w.beta * s, 1);
  return w(s);
}

torch::Tensor weight_function_recall(const WeightFunction& w, const torch::Tensor& K,
                                     const torch::Tensor& V, const torch::Tensor& X) {
  return weight_function_weights(w, K, X).mm(V);  // (Q, d_v)
}

WeightFunctionStoreImpl::WeightFunctionStoreImpl(WeightFunctionStoreOptions options_)
    : options(options_) {
  reset();
}

void WeightFunctionStoreImpl::reset() {
  detail::check_dims(options.d_k(), options.d_v());
  options.weight().validate();
  stored_keys = register_buffer("keys", torch::zeros({0, options.d_k()}));
  stored_values = register_buffer("values", torch::zeros({0, options.d_v()}));
}

void WeightFunctionStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  detail::check_write(stored_keys, keys, values, options.d_k(), options.d_v());
  detail::append_rows(stored_keys, keys);
  detail::append_rows(stored_values, values);
}

torch::Tensor WeightFunctionStoreImpl::recall_weights(const torch::Tensor& x) {
  detail::check_queries(x, options.d_k());
  return weight_function_weights(options.weight(), stored_keys, x);
}

torch::Tensor WeightFunctionStoreImpl::forward(const torch::Tensor& x) {
  detail::check_queries(x, options.d_k());
  return weight_function_recall(options.weight(), stored_keys, stored_values, x);
}

}  // namespace recall
