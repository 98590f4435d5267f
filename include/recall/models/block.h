// One pre-norm block: x = x + attn(norm1(x)); x = x + ffn(norm2(x)) (no second half with ffn =
// none). Attention is the causal softmax store (attention.h); the feed-forward store is any kind
// of feed_forward.h, held as a module.
#pragma once
#include <string>

#include "recall/core/torch.h"
#include "recall/models/activation_cache.h"
#include "recall/models/model_config.h"
#include "recall/models/norm.h"
#include "recall/stores/attention.h"
#include "recall/stores/feed_forward.h"

namespace recall {

struct BlockOptions {
  BlockOptions(NormOptions norm, AttentionOptions attention, FeedForwardOptions feed_forward)
      : norm_(std::move(norm)),
        attention_(std::move(attention)),
        feed_forward_(std::move(feed_forward)) {}
  TORCH_ARG(NormOptions, norm);  // norm1 and norm2
  TORCH_ARG(AttentionOptions, attention);
  TORCH_ARG(FeedForwardOptions, feed_forward);  // kind none: no second half
};

// What a model config's keys make of each block, and of its feed-forward store alone (d_model ->
// d_model).
BlockOptions block_options(const ModelConfig& config);
FeedForwardOptions feed_forward_options(const ModelConfig& config);
// The parameters BlockImpl registers for `options`, without building it: two norms, attention and
// the feed-forward store (one norm and attention alone with feed-forward none).
int64_t block_num_parameters(const BlockOptions& options);

class BlockImpl : public torch::nn::Cloneable<BlockImpl> {
 public:
  explicit BlockImpl(BlockOptions options);
  void reset() override;
  // x: (B, T, d_model) -> (B, T, d_model).
  torch::Tensor forward(const torch::Tensor& x);
  // The same on the plain-torch attention path, recording this block's activations under
  // `prefix` (e.g. "blocks.0.", activation_cache.h).
  torch::Tensor forward(const torch::Tensor& x, ActivationCache& cache, const std::string& prefix);
  // Incremental decoding (attention.h AttentionKv): x (B, T, d_model) at positions kv.length()..
  torch::Tensor forward_incremental(const torch::Tensor& x, AttentionKv& kv);

  BlockOptions options;
  Norm norm1{nullptr};
  Attention attn{nullptr};
  Norm norm2{nullptr};       // ffn != none only
  FeedForward ffn{nullptr};  // ffn != none only
};
TORCH_MODULE(Block);

}  // namespace recall
