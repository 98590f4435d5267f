#include "recall/stores/linear.h"

#include "recall/ops/gemm.h"
#include "recall/stores/feed_forward.h"

namespace recall {

LinearStoreImpl::LinearStoreImpl(LinearStoreOptions options_) : options(options_) {
  reset();
}

void LinearStoreImpl::reset() {
  detail::register_two_layer(*this, w1, w2, options.d_model(), options.hidden(), options.d_out(),
                             options.bias());
}

void LinearStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  detail::write_two_layer(w1, w2, options.bias(), keys, values);
}

torch::Tensor LinearStoreImpl::recall_weights(const torch::Tensor& x) {
  detail::check_features(x, options.d_model());
  return fast_linear(x, w1->weight, w1->bias);
}

torch::Tensor LinearStoreImpl::forward(const torch::Tensor& x) {
  return fast_linear(recall_weights(x), w2->weight, w2->bias);
}

std::optional<FeedForwardOptions> LinearStoreImpl::feed_forward_options() const {
  return FeedForwardOptions(options.d_model())
      .kind(FfnKind::kLinear)
      .hidden(size())
      .bias(options.bias());
}

}  // namespace recall
