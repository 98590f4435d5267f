// One pre-norm block: x = x + attn(norm1(x)); x = x + ffn(norm2(x)) (no second half with ffn =
// none).
#pragma once
#include <torch/torch.h>

#include "recall/models/model.h"
#include "recall/models/norm.h"
#include "recall/stores/attention.h"
#include "recall/stores/feed_forward.h"

namespace recall {

class BlockImpl : public torch::nn::Cloneable<BlockImpl> {
 public:
  explicit BlockImpl(ModelConfig config);
  void reset() override;
  // x: (B, T, d_model) -> (B, T, d_model)
  torch::Tensor forward(const torch::Tensor& x);

  ModelConfig config;
  Norm norm1{nullptr};
  Attention attn{nullptr};
  Norm norm2{nullptr};       // ffn != none only
  FeedForward ffn{nullptr};  // ffn != none only
};
TORCH_MODULE(Block);

}  // namespace recall
