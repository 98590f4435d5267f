#include "recall/stores/glu.h"

#include <fmt/format.h>

#include "recall/core/error.h"
#include "recall/ops/gemm.h"
#include "recall/stores/feed_forward.h"
#include "recall/stores/init.h"

namespace recall {

GluStoreImpl::GluStoreImpl(GluStoreOptions options_) : options(options_) {
  reset();
}

void GluStoreImpl::reset() {
  detail::register_two_layer(*this, w1, w2, options.d_model(), options.hidden(), options.d_out(),
                             options.bias());
  w3 = register_module("w3", make_linear(options.d_model(), options.hidden(), options.bias()));
}

void GluStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  detail::write_two_layer(w1, w2, options.bias(), keys, values, {&w3});
}

torch::Tensor GluStoreImpl::recall_weights(const torch::Tensor& x) {
  detail::check_features(x, options.d_model());
  return activate(options.gate(), fast_linear(x, w1->weight, w1->bias)) *
         fast_linear(x, w3->weight, w3->bias);
}

torch::Tensor GluStoreImpl::forward(const torch::Tensor& x) {
  return fast_linear(recall_weights(x), w2->weight, w2->bias);
}

std::optional<FeedForwardOptions> GluStoreImpl::feed_forward_options() const {
  return FeedForwardOptions(options.d_model())
      .kind(FfnKind::kGlu)
      .activation(options.gate())
      .hidden(size())
      .bias(options.bias());
}

}  // namespace recall
