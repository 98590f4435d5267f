#include "recall/models/block.h"

namespace recall {

FeedForwardOptions feed_forward_options(const ModelConfig& c) {
  return FeedForwardOptions(c.d_model)
      .kind(c.ffn)
      .activation(c.activation)
      .mult(c.ffn_mult)
      .hidden(c.intermediate_size)
      .slots(c.ffn_slots)
      .n_heads(c.n_heads)
      .bias(c.bias);
}

BlockOptions block_options(const ModelConfig& c) {
  return BlockOptions(NormOptions(c.d_model).kind(c.norm).bias(c.bias).eps(c.norm_eps),
                      AttentionOptions(c.d_model, c.n_heads, c.seq_len)
                          .rule(c.attn_rule)
                          .rope(c.pos == PosKind::kRope)
                          .bias(c.bias)
                          .mem_kv(c.attn_mem_kv)
                          .scale(c.attn_scale)
                          .conv(c.attn_conv)
                          .qk_norm(c.attn_qk_norm)
                          .learn_scale(c.attn_scale_learned)
                          .n_kv_heads(c.n_kv_heads)
                          .d_head(c.d_head)
                          .rope_base(c.rope_base)
                          .qkv_bias(c.qkv_bias)
                          .qk_rmsnorm(c.attn_qk_rmsnorm)
                          .norm_eps(c.norm_eps),
                      feed_forward_options(c));
}

int64_t block_num_parameters(const BlockOptions& options) {
  const int64_t norm = norm_num_parameters(options.norm()),
                attn = attention_num_parameters(options.attention());
  if (options.feed_forward().kind() == FfnKind::kNone) return norm + attn;
  return 2 * norm + attn + feed_forward_num_parameters(options.feed_forward());
}

BlockImpl::BlockImpl(BlockOptions options_) : options(std::move(options_)) {
  reset();
}

void BlockImpl::reset() {
  norm1 = register_module("norm1", Norm(options.norm()));
  attn = register_module("attn", Attention(options.attention()));
  if (options.feed_forward().kind() == FfnKind::kNone) return;
  norm2 = register_module("norm2", Norm(options.norm()));
  ffn = register_module("ffn", FeedForward(make_feed_forward(options.feed_forward())));
}

namespace {

// x + f, f a store's output: added into f in place where f is a tensor of its own (not a view of
// another, not a leaf that needs a gradient, x's dtype and sizes), so the sum is written over what
// the store's last product just wrote rather than into a fresh tensor, whose first write costs
// more than the add (bench-gpt fp32, 2 threads: torch's adds 5.1 / 5.4 -> 4.2 / 4.8 ms of a step's
// thread time). The same floats either way: x + f = f + x.
torch::Tensor add_residual(const torch::Tensor& x, torch::Tensor f) {
  if (f.is_view() || (f.is_leaf() && f.requires_grad()) || f.scalar_type() != x.scalar_type() ||
      f.sizes() != x.sizes())
    return x + f;
  return f.add_(x);
}

}  // namespace

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  auto h = add_residual(x, attn(norm1(x)));
  return ffn ? add_residual(h, ffn(norm2(h))) : h;
}

torch::Tensor BlockImpl::forward_incremental(const torch::Tensor& x, AttentionKv& kv) {
  auto h = x + attn->forward_incremental(norm1(x), kv);
  return ffn ? h + ffn(norm2(h)) : h;
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, ActivationCache& cache,
                                 const std::string& prefix) {
  cache.put(prefix + "resid_pre", x);
  const auto a = attn->trace(norm1(x));
  for (const auto& [name, t] : {std::pair{"attn.q", a.q},
                                {"attn.k", a.k},
                                {"attn.v", a.v},
                                {"attn.weights", a.weights},
                                {"attn.out", a.out}})
    cache.put(prefix + name, t);
  auto h = x + a.out;
  cache.put(prefix + "resid_mid", h);
  if (ffn) {
    auto n = norm2(h);
    cache.put(prefix + "ffn.weights", ffn->recall_weights(n));
    auto f = ffn(n);
    cache.put(prefix + "ffn.out", f);
    h = h + f;
  }
  cache.put(prefix + "resid_post", h);
  return h;
}

}  // namespace recall
