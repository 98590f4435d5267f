#include "recall/models/block.h"

namespace recall {

FeedForwardOptions feed_forward_options(const ModelConfig& c) {
  return FeedForwardOptions(c.d_model)
      .kind(c.ffn)
      .activation(c.activation)
      .mult(c.ffn_mult)
      .slots(c.ffn_slots)
      .n_heads(c.n_heads)
      .bias(c.bias);
}

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
                                               .mem_kv(c.attn_mem_kv)
                                               .scale(c.attn_scale)
                                               .conv(c.attn_conv)
                                               .qk_norm(c.attn_qk_norm)
                                               .learn_scale(c.attn_scale_learned)));
  ffn = nullptr;
  if (c.ffn == FfnKind::kNone) return;
  norm2 = register_module("norm2", Norm(norm_options));
  ffn = make_feed_forward(feed_forward_options(c));
  register_module("ffn", as_module(ffn));
}

torch::Tensor BlockImpl::forward_incremental(const torch::Tensor& x, AttentionKv& kv) {
  auto h = x + attn->forward_incremental(norm1(x), kv);
  return ffn ? h + ffn->forward(norm2(h)) : h;
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, ActivationCache* cache,
                                 const std::string& prefix) {
  if (!cache) {
    auto h = x + attn(norm1(x));
    return ffn ? h + ffn->forward(norm2(h)) : h;
  }
  cache->put(prefix + "resid_pre", x);
  auto [q, k, v] = attn->heads(norm1(x));  // (B, T, H, dh), (B, N + T, H, dh) twice
  const auto attended = attn->attend_reference(q, k, v);
  const auto& w = attended.weights;   // (B, H, T, N + T)
  auto a = attn->output(attended.y);  // (B, T, D)
  for (auto [name, t] :
       {std::pair{"attn.q", q}, {"attn.k", k}, {"attn.v", v}, {"attn.weights", w}, {"attn.out", a}})
    cache->put(prefix + name, t);
  auto h = x + a;
  cache->put(prefix + "resid_mid", h);
  if (ffn) {
    auto n = norm2(h);
    cache->put(prefix + "ffn.weights", ffn->recall_weights(n));
    auto f = ffn->forward(n);
    cache->put(prefix + "ffn.out", f);
    h = h + f;
  }
  cache->put(prefix + "resid_post", h);
  return h;
}

}  // namespace recall
