#include "recall/stores/outer_product.h"

namespace recall {

OuterProductStoreImpl::OuterProductStoreImpl(OuterProductStoreOptions options_)
    : options(options_) {
  reset();
}

void OuterProductStoreImpl::reset() {
  detail::check_dims(options.d_k(), options.d_v());
  memory = KeyValueMemory{options.d_k(), options.d_v(), {}, {}};
  weight = torch::zeros({options.d_v(), options.d_k()});  // derived from the memories
}

void OuterProductStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  memory.append(keys, values);
  if (memory.size() == keys.size(0)) weight = weight.to(keys.scalar_type());
  weight = weight + values.t().mm(keys);  // sum of v k^T: (d_v, d_k)
}

torch::Tensor OuterProductStoreImpl::recall(const torch::Tensor& queries) {
  detail::check_queries(queries, options.d_k());
  return queries.mm(weight.t());
}

torch::Tensor OuterProductStoreImpl::recall_weights(const torch::Tensor& queries) {
  detail::check_queries(queries, options.d_k());
  return queries.mm(memory.keys.t());  // (Q, M)
}

}  // namespace recall
