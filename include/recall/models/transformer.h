// The transformer built from memory stores (docs/science.md §5): decoder-only, pre-norm,
//   x = embed(idx) [+ learned positions]
//   for each block: x = x + attn(norm1(x)); x = x + ffn(norm2(x))
//   logits = head(norm_f(x))
// Attention is a causal softmax store whose logit scale follows a beta rule per query position
// (M = t + 1 keys seen, L = seq_len). The feed-forward sublayer is a learned store
// (feed_forward.h): linear, an MLP with an activation, a GLU with a gate activation (silu: SwiGLU),
// learned-KV attention over N persistent key/value slots, or none.
#pragma once
#include <string>
#include <vector>

#include "recall/core/torch.h"
#include "recall/models/activation_cache.h"
#include "recall/models/block.h"
#include "recall/models/model_config.h"
#include "recall/models/norm.h"
#include "recall/stores/attention.h"
#include "recall/stores/beta_rule.h"

namespace recall {

// The keys and values of every attention layer for the tokens decoded so far (KV cache):
// TransformerImpl::forward_incremental appends to it. Empty: nothing decoded yet.
struct KvCache {
  std::vector<AttentionKv> layers;
  int64_t length() const { return layers.empty() ? 0 : layers.front().length(); }
  void clear() { layers.clear(); }
};

// The parameters TransformerImpl registers for `config`, without building it: the token table
// (and the head, untied), learned positions, the blocks and the final norm. Equals
// Transformer(config)->num_parameters().
int64_t model_num_parameters(const ModelConfig& config);

class TransformerImpl : public torch::nn::Cloneable<TransformerImpl> {
 public:
  explicit TransformerImpl(ModelConfig config);
  void reset() override;
  // idx: (B, T) int64 token ids, T may exceed seq_len unless pos = learned -> logits (B, T, vocab).
  // With a cache, also records every block's activations (activation_cache.h); without one, the
  // fast path.
  torch::Tensor forward(const torch::Tensor& idx, ActivationCache* cache = nullptr);
  // The logits at the positions where mask (B, T, bool) holds, (n, vocab): forward(idx)
  // .index({mask}) without the head's work at the other positions. Training and evaluation score
  // a few positions of each mqar prompt, and there the head over a large vocabulary is most of
  // the model's FLOPs.
  torch::Tensor forward_at(const torch::Tensor& idx, const torch::Tensor& mask);
  // Module::load, which also reads files written before the blocks were the list "blocks" (their
  // tensors under block0., block1., ... instead of blocks.0., blocks.1., ...).
  void load(torch::serialize::InputArchive& archive) override;
  // Incremental decoding: idx (B, T) are the tokens at positions kv.length() .. kv.length() + T - 1
  // of sequences whose earlier tokens kv holds -> their logits (B, T, vocab), equal to forward's
  // at those positions of the whole sequences; their keys and values are appended to kv. Each
  // new token costs one pass over the cached keys instead of a forward over the whole prefix.
  torch::Tensor forward_incremental(const torch::Tensor& idx, KvCache& kv);
  // Change the beta rule of every attention layer (evaluation at other lengths).
  void set_attn_rule(BetaRule rule);
  int64_t num_parameters() const;
  // norm_f of the last block's output: (B, T, D) -> (B, T, D); the head's input.
  torch::Tensor hidden(const torch::Tensor& idx, ActivationCache* cache = nullptr);
  // The head: (..., D) -> (..., vocab).
  torch::Tensor logits(const torch::Tensor& h);
  // Block i of `blocks`, typed; i < n_layers.
  std::shared_ptr<BlockImpl> block(size_t i) const;
  ModelConfig config;
  torch::nn::Embedding tok_emb{nullptr};
  torch::nn::Embedding pos_emb{nullptr};  // pos = learned only
  // The n_layers blocks, so parameter names equal the activation cache's (blocks.0.attn...).
  torch::nn::ModuleList blocks{nullptr};
  Norm norm_f{nullptr};
  torch::nn::Linear head{nullptr};  // untied head only
};
TORCH_MODULE(Transformer);

}  // namespace recall
