// One pre-norm block: x = x + attn(norm1(x)); x = x + ffn(norm2(x)) (no second half with ffn =
// none). Attention is the causal softmax store (attention.h); the feed-forward store is built from
// the config by make_feed_forward (feed_forward.h).
#pragma once
#include <memory>
#include <string>

#include "recall/core/torch.h"
#include "recall/models/activation_cache.h"
#include "recall/models/norm.h"
#include "recall/models/transformer.h"
#include "recall/stores/attention.h"
#include "recall/stores/feed_forward.h"

namespace recall {

// The feed-forward options of a model config (d_model -> d_model).
FeedForwardOptions feed_forward_options(const ModelConfig& config);

class BlockImpl : public torch::nn::Cloneable<BlockImpl> {
 public:
  explicit BlockImpl(ModelConfig config);
  void reset() override;
  // x: (B, T, d_model) -> (B, T, d_model). With a cache, records this block's activations under
  // `prefix` (e.g. "blocks.0.", activation_cache.h) and runs the plain-torch attention path.
  torch::Tensor forward(const torch::Tensor& x, ActivationCache* cache = nullptr,
                        const std::string& prefix = "");
  // Incremental decoding (attention.h AttentionKv): x (B, T, d_model) at positions kv.length()..
  torch::Tensor forward_incremental(const torch::Tensor& x, AttentionKv& kv);

  ModelConfig config;
  Norm norm1{nullptr};
  Attention attn{nullptr};
  Norm norm2{nullptr};         // ffn != none only
  std::shared_ptr<Store> ffn;  // ffn != none only; the registered module "ffn"
};
TORCH_MODULE(Block);

}  // namespace recall
