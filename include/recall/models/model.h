// The transformer built from memory stores (docs/science.md §5): decoder-only, pre-norm,
//   x = embed(idx) [+ learned positions]
//   for each block: x = x + attn(norm1(x)); x = x + ffn(norm2(x))
//   logits = head(norm_f(x))
// Attention is a causal softmax store whose logit scale follows a beta rule per query position
// (M = t + 1 keys seen, L = seq_len). The feed-forward sublayer is a learned store
// (feed_forward.h): linear, an MLP with an activation, a GLU with a gate activation (silu: SwiGLU),
// learned-KV attention over N persistent key/value slots, or none.
#pragma once
#include <torch/torch.h>

#include <string>
#include <vector>

#include "recall/models/activation_cache.h"
#include "recall/stores/attention.h"
#include "recall/stores/beta_rule.h"
#include "recall/stores/feed_forward.h"

namespace recall {

enum class PosKind { kRope, kLearned, kNone };
enum class NormKind { kRmsNorm, kLayerNorm };

std::string to_string(PosKind v);
std::string to_string(NormKind v);
// Each throws std::invalid_argument naming the value and the accepted names.
PosKind pos_kind_from_string(const std::string& s);
NormKind norm_kind_from_string(const std::string& s);

// Flat, typed model configuration. validate() throws std::invalid_argument naming the key, value
// and accepted range (e.g. "d_model = 130 is not divisible by n_heads = 4").
struct ModelConfig {
  int64_t vocab_size = 96;
  int64_t d_model = 128;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t seq_len = 256;  // training length: L of the beta rules, size of learned positions
  PosKind pos = PosKind::kRope;
  NormKind norm = NormKind::kRmsNorm;
  bool tied_head = false;
  bool bias = false;  // biases in linear layers (the nanoGPT-style peer uses them)
  BetaRule attn_rule = BetaRule::kNone;
  FfnKind ffn = FfnKind::kMlp;                // TOML also accepts "swiglu": glu with silu
  Activation activation = Activation::kGelu;  // the mlp's activation or the glu's gate
  int64_t ffn_mult = 4;     // hidden width = ffn_mult * d_model (linear, mlp, glu)
  int64_t ffn_slots = 0;    // learned_kv: number of learned key/value slots per head
  int64_t attn_mem_kv = 0;  // learned key/values concatenated to the context keys
  // The attention logit multiplier relative to the standard 1 / sqrt(d_head) (the sharpness beta in
  // units of the standard one); the beta rules multiply it.
  double attn_scale = 1.0;
  // Width of the causal depthwise convolution of q, k, v (attention.h); 0: none. With pos = none it
  // lets recall depend on content alone, so that only the number of memories changes with length.
  int64_t attn_conv = 0;
  void validate() const;
  int64_t head_dim() const { return d_model / n_heads; }
};

// The TOML keys of ModelConfig, equal to its field names.
const std::vector<std::string>& model_config_keys();

class BlockImpl;
class NormImpl;

// The keys and values of every attention layer for the tokens decoded so far (KV cache):
// TransformerImpl::forward_incremental appends to it. Empty: nothing decoded yet.
struct KvCache {
  std::vector<AttentionKv> layers;
  int64_t length() const { return layers.empty() ? 0 : layers.front().length(); }
  void clear() { layers.clear(); }
};

class TransformerImpl : public torch::nn::Cloneable<TransformerImpl> {
 public:
  explicit TransformerImpl(ModelConfig config);
  void reset() override;
  // idx: (B, T) int64 token ids, T may exceed seq_len unless pos = learned -> logits (B, T, vocab).
  // With a cache, also records every block's activations (activation_cache.h); without one, the
  // fast path.
  torch::Tensor forward(const torch::Tensor& idx, ActivationCache* cache = nullptr);
  // Incremental decoding: idx (B, T) are the tokens at positions kv.length() .. kv.length() + T - 1
  // of sequences whose earlier tokens kv holds -> their logits (B, T, vocab), equal to forward's
  // at those positions of the whole sequences; their keys and values are appended to kv. Each
  // new token costs one pass over the cached keys instead of a forward over the whole prefix.
  torch::Tensor forward_incremental(const torch::Tensor& idx, KvCache& kv);
  // Change the beta rule of every attention layer (evaluation at other lengths).
  void set_attn_rule(BetaRule rule);
  int64_t num_parameters() const;
  ModelConfig config;
  torch::nn::Embedding tok_emb{nullptr};
  torch::nn::Embedding pos_emb{nullptr};  // pos = learned only
  std::vector<std::shared_ptr<BlockImpl>> blocks;
  std::shared_ptr<NormImpl> norm_f;
  torch::nn::Linear head{nullptr};  // untied head only
};
TORCH_MODULE(Transformer);

}  // namespace recall
