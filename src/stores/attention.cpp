#include "recall/stores/attention.h"

#include <cmath>

#include "recall/core/error.h"
#include "recall/core/gemm.h"
#include "recall/stores/causal_attention.h"
#include "recall/stores/init.h"
#include "recall/stores/rope.h"

namespace recall {

AttentionImpl::AttentionImpl(AttentionOptions options_) : options(std::move(options_)) {
  reset();
}

void AttentionImpl::reset() {
  const int64_t D = options.d_model(), H = options.n_heads();
  check_arg(D >= 1 && H >= 1 && D % H == 0,
            fmt::format("d_model = {} is not divisible by n_heads = {}", D, H));
  check_arg(!options.rope() || d_head() % 2 == 0,
            fmt::format("d_head = {}: must be even with rope", d_head()));
  check_arg(options.seq_len() >= 2, fmt::format("seq_len = {}: must be >= 2", options.seq_len()));
  check_arg(options.mem_kv() >= 0, fmt::format("attn_mem_kv = {}: must be >= 0", options.mem_kv()));
  qkv = register_module("qkv", make_linear(D, 3 * D, options.bias()));
  out = register_module("out", make_linear(D, D, options.bias()));
  if (options.mem_kv() > 0) {
    const int64_t N = options.mem_kv();
    mem_k = register_parameter("mem_k", torch::randn({H, N, d_head()}) / std::sqrt(d_head()));
    mem_v = register_parameter("mem_v", torch::randn({H, N, d_head()}) * kInitStd);
  }
  // After set_rule(ssmax) a clone must register the scale too (ssmax is non-null in the copy).
  if (options.rule() == BetaRule::kSsmax || ssmax)
    ssmax = register_module(
        "ssmax", SsmaxScale(SsmaxScaleOptions(H, 1.0, static_cast<double>(options.seq_len()))));
}

void AttentionImpl::set_rule(BetaRule rule) {
  options.rule(rule);
  if (rule == BetaRule::kSsmax && !ssmax)
    ssmax = register_module("ssmax",
                            SsmaxScale(SsmaxScaleOptions(options.n_heads(), 1.0,
                                                         static_cast<double>(options.seq_len()))));
}

torch::Tensor AttentionImpl::logit_scale(int64_t T, torch::ScalarType dtype) {
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d_head()));
  auto M = torch::arange(1, T + 1, torch::TensorOptions().dtype(torch::kFloat64));  // (T,)
  if (options.rule() == BetaRule::kSsmax)
    return ssmax->forward(M.to(dtype)) * inv_sqrt_d;  // (H, T), s_h ln M with beta_0 = 1
  const double L = static_cast<double>(options.seq_len());
  return (beta_for(options.rule(), M, L, 1.0) * inv_sqrt_d).to(dtype).unsqueeze(0);  // (1, T)
}

std::array<torch::Tensor, 3> AttentionImpl::project(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), H = options.n_heads();
  auto qkv_heads =
      fast_linear(x, qkv->weight, qkv->bias).view({B, T, 3, H, d_head()});  // (B, T, 3, H, dh)
  auto parts = qkv_heads.unbind(2);  // views (B, T, H, dh), rows 3 D apart
  if (options.rope()) {
    auto tables = rope_tables(T, d_head(), x.scalar_type());
    return {apply_rope(parts[0], tables), apply_rope(parts[1], tables), parts[2]};
  }
  return {parts[0], parts[1], parts[2]};
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  check_arg(x.dim() == 3 && x.size(2) == options.d_model(),
            fmt::format("attention input: expected (B, T, d_model = {}), got {} dimensions",
                        options.d_model(), x.dim()));
  const int64_t B = x.size(0), T = x.size(1), H = options.n_heads(), dh = d_head();
  const int64_t N = options.mem_kv();  // keys: N memories, then the T context keys
  auto [q, k, v] = project(x);
  if (N > 0) {
    auto expand = [&](const torch::Tensor& m) {  // (H, N, dh) -> (B, N, H, dh)
      return m.transpose(0, 1).unsqueeze(0).expand({B, N, H, dh});
    };
    k = torch::cat({expand(mem_k), k}, 1);  // (B, N + T, H, dh)
    v = torch::cat({expand(mem_v), v}, 1);  // (B, N + T, H, dh)
  }
  double alpha = 1.0;
  if (options.rule() == BetaRule::kNone) {
    alpha = 1.0 / std::sqrt(static_cast<double>(dh));  // constant scale: fused into the GEMM
  } else {
    q = q * logit_scale(T, x.scalar_type()).t().unsqueeze(-1);  // (B, T, H, dh) * (T, H|1, 1)
  }
  auto y = causal_attention(q, k, v, N, alpha);  // (B, T, H, dh)
  if (head_mask.defined()) y = y * head_mask.to(y.dtype()).view({1, 1, H, 1});
  return fast_linear(y.view({B, T, H * dh}), out->weight, out->bias);  // (B, T, D)
}

}  // namespace recall
