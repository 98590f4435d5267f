#include "recall/models/norm.h"

#include "recall/ops/layer_norm.h"

namespace recall {

int64_t norm_num_parameters(const NormOptions& options) {
  const bool bias = options.kind() == NormKind::kLayerNorm && options.bias();
  return options.dim() * (bias ? 2 : 1);
}

NormImpl::NormImpl(NormOptions options_) : options(options_) {
  reset();
}

void NormImpl::reset() {
  weight = register_parameter("weight", torch::ones({options.dim()}));
  bias = options.kind() == NormKind::kLayerNorm && options.bias()
             ? register_parameter("bias", torch::zeros({options.dim()}))
             : torch::Tensor();
}

torch::Tensor NormImpl::forward(const torch::Tensor& x) {
  if (options.kind() == NormKind::kLayerNorm)
    return fast_layer_norm(x, weight, bias, options.eps());
  return rms_norm(x, weight, options.eps());
}

}  // namespace recall
