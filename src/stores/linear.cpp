#include "recall/stores/linear.h"

#include <fmt/format.h>

#include "recall/core/error.h"
#include "recall/core/gemm.h"
#include "recall/stores/init.h"

namespace recall {

LinearStoreImpl::LinearStoreImpl(LinearStoreOptions options_) : options(options_) {
  reset();
}

void LinearStoreImpl::reset() {
  const int64_t D = options.d_model(), out = options.d_out() > 0 ? options.d_out() : D;
  detail::check_dims(D, out);
  check_arg(options.hidden() >= 0, fmt::format("hidden = {}: must be >= 0", options.hidden()));
  w1 = register_module("w1", make_linear(D, options.hidden(), options.bias()));
  w2 = register_module("w2", make_linear(options.hidden(), out, options.bias()));
}

void LinearStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  check_arg(!options.bias(), "write: a store with biases cannot be written");
  detail::check_write(w1->weight, keys, values, w1->weight.size(1), w2->weight.size(0));
  detail::append_rows(w1->weight, keys);
  detail::append_rows(w2->weight, values.t(), 1);
}

torch::Tensor LinearStoreImpl::recall_weights(const torch::Tensor& x) {
  detail::check_features(x, options.d_model());
  return fast_linear(x, w1->weight, w1->bias);
}

torch::Tensor LinearStoreImpl::forward(const torch::Tensor& x) {
  return fast_linear(recall_weights(x), w2->weight, w2->bias);
}

}  // namespace recall
