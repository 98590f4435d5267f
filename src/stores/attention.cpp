#include "recall/stores/attention.h"

#include <cmath>
#include <limits>

#include "recall/core/error.h"
#include "recall/ops/causal_attention.h"
#include "recall/ops/gemm.h"
#include "recall/stores/init.h"
#include "recall/stores/rope.h"

namespace recall {

AttentionImpl::AttentionImpl(AttentionOptions options_) : options(std::move(options_)) {
  reset();
}

void AttentionImpl::reset() {
  // What the maths needs, in the options' own terms (a model's config states its keys' bounds to
  // the user first: ModelConfig::validate).
  const int64_t D = options.d_model(), H = options.n_heads(), W = options.conv();
  check_arg(D >= 1 && H >= 1 && (options.d_head() > 0 || D % H == 0),
            fmt::format("AttentionOptions: d_model {} is no multiple of n_heads {}", D, H));
  check_arg(
      options.d_head() >= 0 && options.n_kv_heads() >= 0 && H % kv_heads() == 0,
      fmt::format("AttentionOptions: n_heads {} is no multiple of n_kv_heads {}", H, kv_heads()));
  check_arg(!(options.qk_norm() && options.qk_rmsnorm()),
            "AttentionOptions: qk_norm and qk_rmsnorm norm the same vectors two ways");
  check_arg(!options.rope() || d_head() % 2 == 0,
            fmt::format("AttentionOptions: rope rotates pairs, d_head {} is odd", d_head()));
  check_arg(options.seq_len() >= 2,
            fmt::format("AttentionOptions: seq_len {} is below 2, where ln L vanishes",
                        options.seq_len()));
  check_arg(std::isfinite(options.scale()) && options.scale() > 0,
            fmt::format("AttentionOptions: scale {} is no positive number", options.scale()));
  check_arg(options.mem_kv() >= 0,
            fmt::format("AttentionOptions: mem_kv {} is negative", options.mem_kv()));
  check_arg(
      W == 0 || (W >= 2 && W <= kMaxConv),
      fmt::format("AttentionOptions: conv {} is neither 0 nor a width in [2, {}]", W, kMaxConv));
  const int64_t C = (H + 2 * kv_heads()) * d_head();  // q, k, v channels: 3 D under MHA
  qkv = register_module("qkv", make_linear(D, C, options.bias() || options.qkv_bias()));
  out = register_module("out", make_linear(H * d_head(), D, options.bias()));
  if (options.mem_kv() > 0) {
    const int64_t N = options.mem_kv();
    mem_k = register_parameter("mem_k", torch::randn({H, N, d_head()}) / std::sqrt(d_head()));
    mem_v = register_parameter("mem_v", torch::randn({H, N, d_head()}) * kInitStd);
  }
  if (options.conv() > 0) {
    // the identity (c_0 = 1): training starts from plain attention and learns what to mix in
    auto c = torch::zeros({C, options.conv()});
    c.select(1, 0).fill_(1.0);
    conv = register_parameter("conv", c);
  }
  if (options.qk_rmsnorm()) {
    q_norm = register_parameter("q_norm", torch::ones({d_head()}));
    k_norm = register_parameter("k_norm", torch::ones({d_head()}));
  }
  if (options.learn_scale()) beta = register_parameter("beta", torch::full({H}, options.scale()));
  // heads_masked_ is left as it is: a clone keeps its source's flag along with the mask's values
  head_mask = register_buffer("head_mask", torch::ones({H}));
  // After set_rule(ssmax) a clone must register the scale too (ssmax is non-null in the copy).
  if (options.rule() == BetaRule::kSsmax || ssmax)
    ssmax = register_module(
        "ssmax", SsmaxScale(SsmaxScaleOptions(H, 1.0, static_cast<double>(options.seq_len()))));
}

int64_t attention_num_parameters(const AttentionOptions& o) {
  const int64_t D = o.d_model(), H = o.n_heads(), G = o.n_kv_heads() > 0 ? o.n_kv_heads() : H,
                dh = o.d_head() > 0 ? o.d_head() : D / H, C = (H + 2 * G) * dh;
  return C * D + H * dh * D +
         (o.bias()       ? C + D
          : o.qkv_bias() ? C
                         : 0) +
         2 * o.mem_kv() * H * dh + C * o.conv() + (o.qk_rmsnorm() ? 2 * dh : 0) +
         (o.learn_scale() ? H : 0) + (o.rule() == BetaRule::kSsmax ? H : 0);
}

void AttentionImpl::set_rule(BetaRule rule) {
  options.rule(rule);
  if (rule == BetaRule::kSsmax && !ssmax)
    ssmax = register_module("ssmax",
                            SsmaxScale(SsmaxScaleOptions(options.n_heads(), 1.0,
                                                         static_cast<double>(options.seq_len()))));
}

void AttentionImpl::set_head_mask(const torch::Tensor& mask) {
  check_arg(mask.sizes() == head_mask.sizes(),
            fmt::format("head_mask: expected ({},) multipliers, one per head, got {} values",
                        options.n_heads(), mask.numel()));
  torch::NoGradGuard no_grad;
  head_mask.copy_(mask);
  heads_masked_ = !head_mask.eq(1).all().item<bool>();
}

void AttentionImpl::load(torch::serialize::InputArchive& archive) {
  for (auto& p : named_parameters(/*recurse=*/false)) archive.read(p.key(), p.value());
  torch::Tensor mask = torch::ones_like(head_mask);
  archive.try_read("head_mask", mask, /*is_buffer=*/true);
  for (auto& child : named_children()) {
    torch::serialize::InputArchive sub;
    archive.read(child.key(), sub);
    child.value()->load(sub);
  }
  set_head_mask(mask.to(head_mask.device()));
}

double AttentionImpl::fixed_scale() const {
  // unit q and k: cos(q, k) is already of order 1, and beta is the scale itself
  const double unit = options.qk_norm() ? 1.0 : 1.0 / std::sqrt(static_cast<double>(d_head()));
  return options.learn_scale() ? unit : options.scale() * unit;
}

torch::Tensor AttentionImpl::logit_scale(int64_t T, const torch::TensorOptions& like) {
  // float64 on the CPU, rounded once onto the input's device: the same scale on every device
  auto M = torch::arange(1, T + 1, torch::TensorOptions().dtype(torch::kFloat64));  // (T,)
  torch::Tensor s;
  if (options.rule() == BetaRule::kSsmax) {
    s = ssmax->forward(M.to(like)) * fixed_scale();  // (H, T), s_h ln M with beta_0 = 1
  } else {
    const double L = static_cast<double>(options.seq_len());
    s = (beta_for(options.rule(), M, L, 1.0) * fixed_scale()).to(like).unsqueeze(0);  // (1, T)
  }
  return options.learn_scale() ? s * beta.to(like).unsqueeze(1) : s;  // (H, T) when learned
}

torch::Tensor AttentionImpl::unit(const torch::Tensor& x) const {
  if (!options.qk_norm()) return x;
  // torch.nn.functional.normalize's formula: a zero row stays zero instead of turning into NaN
  return x / x.norm(2, -1, /*keepdim=*/true).clamp_min(1e-12);
}

torch::Tensor AttentionImpl::convolve(const torch::Tensor& z, const torch::Tensor& before) const {
  const int64_t T = z.size(1), W = options.conv();
  // Row t of tap j reads z_{t-j}: from `before` (incremental decoding) or, before the sequence
  // starts, nothing. No zeros are materialised: the training forward pays no copy of z.
  auto full = before.defined() ? torch::cat({before, z}, 1) : z;  // (B, P + T, C)
  const int64_t P = full.size(1) - T;
  auto y = z * conv.select(1, 0);
  for (int64_t j = 1; j < W; ++j) {
    const int64_t from = std::max<int64_t>(0, j - P);  // the first row with a z_{t-j}
    if (from >= T) break;
    y.narrow(1, from, T - from).add_(full.narrow(1, P + from - j, T - from) * conv.select(1, j));
  }
  return y;  // (B, T, C)
}

std::array<torch::Tensor, 3> AttentionImpl::project(const torch::Tensor& x, int64_t offset,
                                                    torch::Tensor* tail) {
  const int64_t B = x.size(0), T = x.size(1), H = options.n_heads(), G = kv_heads(), dh = d_head(),
                W = options.conv();
  auto z = fast_linear(x, qkv->weight, qkv->bias);  // (B, T, (H + 2 G) dh)
  if (W > 0) {
    const torch::Tensor before = tail ? *tail : torch::Tensor();
    auto y = convolve(z, before);
    if (tail) {
      auto full = before.defined() ? torch::cat({before, z}, 1) : z;
      // the last W - 1 rows, zeros in front while fewer positions have been seen
      if (full.size(1) < W - 1)
        full =
            torch::cat({torch::zeros({B, W - 1 - full.size(1), z.size(2)}, z.options()), full}, 1);
      *tail = full.narrow(1, full.size(1) - (W - 1), W - 1).contiguous();  // (B, W - 1, C)
    }
    z = y;
  }
  // views into z's rows, (H + 2 G) dh apart: the same strides as a (B, T, 3, H, dh) view under MHA.
  // One split, not three narrows: its backward writes z's gradient in one pass (a cat), where
  // each narrow's zero-filled a gradient of z's size and added its part (7 % of a bench-gpt step).
  const auto parts = z.split_with_sizes({H * dh, G * dh, G * dh}, 2);
  auto q = parts[0].view({B, T, H, dh});  // (B, T, H, dh)
  auto k = parts[1].view({B, T, G, dh});  // (B, T, G, dh)
  auto v = parts[2].view({B, T, G, dh});
  if (options.qk_rmsnorm()) {
    // before RoPE, as transformers' Qwen3: the rotation keeps the norm but mixes the channels
    // (i, i + d_head/2) that the gains weigh, so the order matters
    q = rms_norm(q, q_norm, options.norm_eps());
    k = rms_norm(k, k_norm, options.norm_eps());
  }
  if (options.rope()) {
    auto tables = rope_tables(offset + T, dh, x.options(), options.rope_base());
    if (offset > 0) tables = {tables.cos.narrow(0, offset, T), tables.sin.narrow(0, offset, T)};
    // a rotation keeps the length, so normalising after it is the same as before it
    return {unit(apply_rope(q, tables)), unit(apply_rope(k, tables)), v};
  }
  return {unit(q), unit(k), v};
}

torch::Tensor AttentionImpl::keys() const {
  if (mem_k.defined()) return unit(mem_k);
  return torch::zeros({options.n_heads(), 0, d_head()}, qkv->weight.options());
}

torch::Tensor AttentionImpl::values() const {
  if (mem_v.defined()) return mem_v;
  return torch::zeros({options.n_heads(), 0, d_head()}, qkv->weight.options());
}

std::array<torch::Tensor, 3> AttentionImpl::heads(const torch::Tensor& x) {
  check_arg(x.dim() == 3 && x.size(2) == options.d_model(),
            fmt::format("attention input: expected (B, T, d_model = {}), got {} dimensions",
                        options.d_model(), x.dim()));
  auto [q, k, v] = project(x);  // (B, T, H, dh), (B, T, G, dh) twice
  return {q, with_memories(keys(), repeat_kv(k)),
          with_memories(mem_v, repeat_kv(v))};  // (B, N + T, H, dh)
}

torch::Tensor AttentionImpl::repeat_kv(const torch::Tensor& k) const {
  const int64_t G = kv_heads();
  if (G == options.n_heads()) return k;
  return k.repeat_interleave(options.n_heads() / G, 2);  // (B, S, G, dh) -> (B, S, H, dh)
}

torch::Tensor AttentionImpl::with_memories(const torch::Tensor& mem, const torch::Tensor& k) {
  const int64_t B = k.size(0), N = options.mem_kv();
  if (N == 0) return k;
  // (H, N, dh) -> (B, N, H, dh)
  auto m = mem.transpose(0, 1).unsqueeze(0).expand({B, N, options.n_heads(), d_head()});
  return torch::cat({m, k}, 1);
}

torch::Tensor AttentionImpl::forward_incremental(const torch::Tensor& x, AttentionKv& kv) {
  check_arg(x.dim() == 3 && x.size(2) == options.d_model(),
            fmt::format("attention input: expected (B, T, d_model = {}), got {} dimensions",
                        options.d_model(), x.dim()));
  const int64_t offset = kv.length();
  // q (B, T, H, dh), k and v (B, T, G, dh), at positions offset..
  auto [q, k, v] = project(x, offset, &kv.tail);
  kv.k = offset > 0 ? torch::cat({kv.k, k}, 1) : k.contiguous();  // (B, offset + T, G, dh)
  kv.v = offset > 0 ? torch::cat({kv.v, v}, 1) : v.contiguous();
  const auto a = attend_reference(q, with_memories(keys(), repeat_kv(kv.k)),
                                  with_memories(mem_v, repeat_kv(kv.v)), offset);
  return output(a.y);
}

Attended AttentionImpl::attend_reference(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, int64_t offset) {
  const int64_t T = q.size(1), N = options.mem_kv();
  if (emulation_.scale.defined()) return attend_emulated(q, k, v, offset);
  // (H|1, T): beta(p + 1) / beta_0 * scale / sqrt(dh) of the query rows
  const auto scale = logit_scale(offset + T, q.options()).narrow(1, offset, T);
  return causal_attention_reference(q, k, v, scale, N, offset);
}

Attended AttentionImpl::attend_emulated(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, int64_t offset) {
  const int64_t T = q.size(1), N = options.mem_kv(), S = k.size(1);
  check_arg(emulation_.scale.size(1) >= offset + T && emulation_.count.size(0) >= offset + T,
            "attention: the length emulation is shorter than the prompt");
  const auto scale = emulation_.scale.narrow(1, offset, T).to(q.options());  // (H|1, T)
  auto a = causal_attention_reference(q, k, torch::Tensor(), scale, N, offset);
  if (!v.defined()) return a;
  // (T, S): the context keys count count_t times, the learned memories once
  auto count = torch::ones({T, S}, q.options());
  count.narrow(1, N, S - N)
      .mul_(emulation_.count.narrow(0, offset, T).to(q.options()).unsqueeze(1));
  const auto top = a.weights.argmax(-1, /*keepdim=*/true);  // (B, H, T, 1): the key read
  if (emulation_.quadrature) {
    auto others = torch::ones_like(a.weights).scatter_(-1, top, 0.0);  // (B, H, T, S)
    others.narrow(-1, 0, N).zero_();
    const auto wo = a.weights * others;  // the other context keys
    const auto wk = a.weights - wo;      // the read key and the memories, once
    const auto y_o = torch::einsum("bhts,bshd->bthd", {wo, v});  // (B, T, H, dh)
    // (B, T, H, dh): the mean value of the context up to each query
    const auto seen = torch::arange(offset + 1, offset + T + 1, q.options()).view({1, T, 1, 1});
    const auto v_bar = v.narrow(1, N, S - N).cumsum(1).narrow(1, offset, T) / seen;
    const auto W = wo.sum(-1).permute({0, 2, 1}).unsqueeze(-1);  // (B, T, H, 1)
    const auto n = emulation_.count.narrow(0, offset, T).to(q.options()).view({1, T, 1, 1});
    const auto y =
        torch::einsum("bhts,bshd->bthd", {wk, v}) + n * W * v_bar + n.sqrt() * (y_o - W * v_bar);
    return {y / (wk.sum(-1).permute({0, 2, 1}).unsqueeze(-1) + n * W), a.weights};
  }
  auto w = a.weights * count;  // (B, H, T, S)
  w.scatter_(-1, top, a.weights.gather(-1, top));
  w = w / w.sum(-1, /*keepdim=*/true);
  return {torch::einsum("bhts,bshd->bthd", {w, v}), a.weights};  // (B, T, H, dh)
}

torch::Tensor AttentionImpl::output(const torch::Tensor& y) {
  const int64_t B = y.size(0), T = y.size(1), H = options.n_heads();
  auto h = heads_masked_ ? y * head_mask.to(y.options()).view({1, 1, H, 1}) : y;
  return fast_linear(h.reshape({B, T, H * d_head()}), out->weight, out->bias);  // (B, T, D)
}

AttentionTrace AttentionImpl::trace(const torch::Tensor& x) {
  auto [q, k, v] = heads(x);  // (B, T, H, dh), (B, N + T, H, dh) twice
  const auto attended = attend_reference(q, k, v);
  return {q, k, v, attended.weights, output(attended.y)};
}

torch::Tensor AttentionImpl::recall_weights(const torch::Tensor& x) {
  auto [q, k, v] = heads(x);
  return attend_reference(q, k, torch::Tensor()).weights;  // (B, H, T, N + T)
}

bool AttentionImpl::plain_heads() const {
  return options.mem_kv() == 0 && kv_heads() == options.n_heads() && options.conv() == 0 &&
         !options.qk_rmsnorm() && !options.rope() && !options.qk_norm();
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), N = options.mem_kv();  // keys: N memories, then T
  const bool fixed = options.rule() == BetaRule::kNone && !options.learn_scale();
  if (fixed && plain_heads() && !emulation_.scale.defined() && causal_attention_runs(x, x, x)) {
    // q, k, v are the projection's slices as they are: the kernel takes it whole
    auto z = fast_linear(x, qkv->weight, qkv->bias).view({B, T, 3, options.n_heads(), d_head()});
    return output(causal_attention_packed(z, fixed_scale()));  // (B, T, H, dh) -> (B, T, D)
  }
  auto [q, k, v] = heads(x);  // (B, T, H, dh), (B, N + T, H, dh) twice
  if (emulation_.scale.defined() || !causal_attention_runs(q, k, v))
    return output(attend_reference(q, k, v).y);
  double alpha = 1.0;
  if (fixed) {
    alpha = fixed_scale();  // constant scale: fused into the GEMM
  } else {
    q = q * logit_scale(T, x.options()).t().unsqueeze(-1);  // (B, T, H, dh) * (T, H|1, 1)
  }
  return output(causal_attention(q, k, v, N, alpha));  // (B, T, H, dh) -> (B, T, D)
}

}  // namespace recall
