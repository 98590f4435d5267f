#include "recall/models/block.h"

namespace recall {

BlockImpl::BlockImpl(ModelConfig config_) : config(std::move(config_)) {
  reset();
}

void BlockImpl::reset() {
  const ModelConfig& c = config;
  auto norm_options = NormOptions(c.d_model).kind(c.norm).bias(c.bias);
  norm1 = register_module("norm1", Norm(norm_options));
  attn = register_module("attn", Attention(AttentionOptions(c.d_model, c.n_heads, c.seq_len)
                                               .rule(c.attn_rule)
                                               .rope(c.pos == PosKind::kRope)
                                               .bias(c.bias)
                                               .mem_kv(c.attn_mem_kv)));
  if (c.ffn == FfnKind::kNone) return;
  norm2 = register_module("norm2", Norm(norm_options));
  ffn = register_module("ffn", FeedForward(FeedForwardOptions(c.d_model)
                                               .kind(c.ffn)
                                               .activation(c.activation)
                                               .mult(c.ffn_mult)
                                               .slots(c.ffn_slots)
                                               .n_heads(c.n_heads)
                                               .bias(c.bias)));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  auto h = x + attn(norm1(x));
  return ffn ? h + ffn(norm2(h)) : h;
}

}  // namespace recall
