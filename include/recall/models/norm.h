// The normalisation of the pre-norm blocks: LayerNorm (x - mean) / std * w + b, or
// RMSNorm x / rms(x) * w, over the last dimension.
#pragma once
#include "recall/core/torch.h"
#include "recall/models/model_config.h"
#include "recall/ops/layer_norm.h"

namespace recall {

struct NormOptions {
  explicit NormOptions(int64_t dim) : dim_(dim) {}
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(NormKind, kind) = NormKind::kRmsNorm;
  TORCH_ARG(bool, bias) = false;  // layernorm only
  TORCH_ARG(double, eps) = kNormEps;
};

// The parameters NormImpl registers: its gain, and a bias for a LayerNorm with one.
int64_t norm_num_parameters(const NormOptions& options);

class NormImpl : public torch::nn::Cloneable<NormImpl> {
 public:
  explicit NormImpl(NormOptions options);
  void reset() override;
  // x: (..., dim) -> (..., dim); LayerNorm through recall/ops/layer_norm.h (its fused kernel on
  // float32 CPU tensors).
  torch::Tensor forward(const torch::Tensor& x);
  NormOptions options;
  torch::Tensor weight;  // (dim,)
  torch::Tensor bias;    // (dim,), layernorm with bias only
};
TORCH_MODULE(Norm);

}  // namespace recall
