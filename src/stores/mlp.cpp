#include "recall/stores/mlp.h"

#include "recall/ops/gemm.h"
#include "recall/stores/feed_forward.h"

namespace recall {

MlpStoreImpl::MlpStoreImpl(MlpStoreOptions options_) : options(options_) {
  reset();
}

void MlpStoreImpl::reset() {
  detail::register_two_layer(*this, w1, w2, options.d_model(), options.hidden(), options.d_out(),
                             options.bias());
}

void MlpStoreImpl::write(const torch::Tensor& keys, const torch::Tensor& values) {
  detail::write_two_layer(w1, w2, options.bias(), keys, values);
}

torch::Tensor MlpStoreImpl::recall_weights(const torch::Tensor& x) {
  detail::check_features(x, options.d_model());
  if (options.activation() == Activation::kGelu && w1->bias.defined())
    return fast_linear_gelu(x, w1->weight, w1->bias);  // one fused pass each way
  return activate(options.activation(), fast_linear(x, w1->weight, w1->bias));
}

torch::Tensor MlpStoreImpl::forward(const torch::Tensor& x) {
  if (options.activation() == Activation::kGelu && w1->bias.defined()) {
    detail::check_features(x, options.d_model());
    return fast_mlp_gelu(x, w1->weight, w1->bias, w2->weight, w2->bias);  // one function
  }
  return fast_linear(recall_weights(x), w2->weight, w2->bias);
}

std::optional<FeedForwardOptions> MlpStoreImpl::feed_forward_options() const {
  return FeedForwardOptions(options.d_model())
      .kind(FfnKind::kMlp)
      .activation(options.activation())
      .hidden(size())
      .bias(options.bias());
}

}  // namespace recall
