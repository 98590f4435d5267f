#include "recall/stores/weight_function_store.h"

namespace recall {

WeightStoreImpl::WeightStoreImpl(WeightStoreOptions options_) : options(options_) {
  reset();
}

void WeightStoreImpl::reset() {
  detail::check_dims(options.d_k(), options.d_v());
  options.weight().validate();
  memory = KeyValueMemory{options.d_k(), options.d_v(), {}, {}};
}

void WeightStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  memory.append(keys, values);
}

torch::Tensor WeightStoreImpl::recall_weights(const torch::Tensor& queries) {
  detail::check_queries(queries, options.d_k());
  auto s = queries.mm(memory.keys.t());  // (Q, M) similarities
  if (options.weight().kind == WeightKind::kSoftmax)
    return torch::softmax(options.weight().beta * s, 1);
  return options.weight()(s);
}

torch::Tensor WeightStoreImpl::recall(const torch::Tensor& queries) {
  return recall_weights(queries).mm(memory.values);  // (Q, d_v)
}

}  // namespace recall
