#include "recall/stores/glu.h"

#include <fmt/format.h>

#include "recall/core/error.h"
#include "recall/core/gemm.h"
#include "recall/stores/init.h"

namespace recall {

GluStoreImpl::GluStoreImpl(GluStoreOptions options_) : options(options_) {
  reset();
}

void GluStoreImpl::reset() {
  const int64_t D = options.d_model(), out = options.d_out() > 0 ? options.d_out() : D;
  detail::check_dims(D, out);
  check_arg(options.hidden() >= 0, fmt::format("hidden = {}: must be >= 0", options.hidden()));
  w1 = register_module("w1", make_linear(D, options.hidden(), options.bias()));
  w2 = register_module("w2", make_linear(options.hidden(), out, options.bias()));
  w3 = register_module("w3", make_linear(D, options.hidden(), options.bias()));
}

void GluStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  check_arg(!options.bias(), "write: a store with biases cannot be written");
  detail::check_write(w1->weight, keys, values, w1->weight.size(1), w2->weight.size(0));
  detail::append_rows(w1->weight, keys);
  detail::append_rows(w3->weight, keys);
  detail::append_rows(w2->weight, values.t(), 1);
}

torch::Tensor GluStoreImpl::recall_weights(const torch::Tensor& x) {
  detail::check_features(x, options.d_model());
  return activate(options.gate(), fast_linear(x, w1->weight, w1->bias)) *
         fast_linear(x, w3->weight, w3->bias);
}

torch::Tensor GluStoreImpl::forward(const torch::Tensor& x) {
  return fast_linear(recall_weights(x), w2->weight, w2->bias);
}

}  // namespace recall
