// Naive references for the model tests: explicit loops over heads and positions, float64.
#pragma once
#include <cmath>

#include "recall/core/torch.h"
#include "recall/stores/attention.h"
#include "recall/stores/beta_rule.h"
#include "recall/stores/feed_forward.h"

namespace recall::test {

// Rotates the pair (i, i + d/2) of a head vector at position t by t * base^(-2i/d).
inline torch::Tensor rope_naive(const torch::Tensor& v, int64_t t, double base = 10000.0) {
  const int64_t d = v.size(0), half = d / 2;
  auto r = v.clone();
  for (int64_t i = 0; i < half; ++i) {
    const double angle = t * std::pow(base, -2.0 * i / d);
    const double a = v[i].item<double>(), b = v[i + half].item<double>();
    r[i] = a * std::cos(angle) - b * std::sin(angle);
    r[i + half] = b * std::cos(angle) + a * std::sin(angle);
  }
  return r;
}

inline torch::Tensor linear_naive(const torch::Tensor& x, const torch::nn::Linear& l) {
  auto y = torch::matmul(x, l->weight.t());
  return l->bias.defined() ? y + l->bias : y;
}

// v / |v| with qk_norm (the essay's unit keys and queries), v otherwise.
inline torch::Tensor unit_naive(const AttentionImpl& a, const torch::Tensor& v) {
  if (!a.options.qk_norm()) return v;
  return v / std::sqrt(v.dot(v).item<double>());
}

// With qk_rmsnorm, v / sqrt(mean(v^2) + eps) * gain channel by channel (Qwen3's q_norm, k_norm);
// v otherwise.
inline torch::Tensor rmsnorm_naive(const AttentionImpl& a, const torch::Tensor& v,
                                   const torch::Tensor& gain) {
  if (!a.options.qk_rmsnorm()) return v;
  const double ms = v.dot(v).item<double>() / static_cast<double>(v.size(0));
  auto r = v.clone();
  for (int64_t i = 0; i < v.size(0); ++i)
    r[i] = v[i].item<double>() / std::sqrt(ms + a.options.norm_eps()) * gain[i].item<double>();
  return r;
}

// x: (B, T, D) -> (B, T, D), loops over batch, head, query and key; query head h reads key/value
// head h / (H / G).
inline torch::Tensor attention_naive(AttentionImpl& a, const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), H = a.options.n_heads(), G = a.kv_heads();
  const int64_t dh = a.d_head(), N = a.options.mem_kv(), Q = H * dh, KV = G * dh;
  const double L = static_cast<double>(a.options.seq_len()), rope_base = a.options.rope_base();
  auto y = torch::zeros({B, T, Q}, x.options());
  for (int64_t b = 0; b < B; ++b) {
    auto qkv = linear_naive(x[b], a.qkv);  // (T, 3D)
    if (a.options.conv() > 0) {
      // each channel: sum over j < W of c_j times the projection of position t - j
      auto mixed = torch::zeros_like(qkv);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < a.options.conv() && j <= t; ++j)
          mixed[t] += a.conv.select(1, j) * qkv[t - j];
      qkv = mixed;
    }
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);  // the key/value head of query head h
      for (int64_t t = 0; t < T; ++t) {
        auto q = rmsnorm_naive(a, qkv[t].slice(0, h * dh, (h + 1) * dh), a.q_norm);
        if (a.options.rope()) q = rope_naive(q, t, rope_base);
        q = unit_naive(a, q);
        const double M = t + 1.0;
        // beta_0: the per-head parameter when learned; 1 / sqrt(dh) unless q and k are unit
        const double base =
            (a.options.learn_scale() ? a.beta[h].item<double>() : a.options.scale()) /
            (a.options.qk_norm() ? 1.0 : std::sqrt(static_cast<double>(dh)));
        const double scale = base * (a.options.rule() == BetaRule::kSsmax
                                         ? a.ssmax->scale[h].item<double>() * std::log(M)
                                         : beta_for(a.options.rule(), M, L, 1.0));
        std::vector<double> logits;
        std::vector<torch::Tensor> values;
        for (int64_t m = 0; m < N; ++m) {
          logits.push_back(scale * q.dot(unit_naive(a, a.mem_k[h][m])).item<double>());
          values.push_back(a.mem_v[h][m]);
        }
        for (int64_t s = 0; s <= t; ++s) {
          auto k = rmsnorm_naive(a, qkv[s].slice(0, Q + g * dh, Q + (g + 1) * dh), a.k_norm);
          if (a.options.rope()) k = rope_naive(k, s, rope_base);
          k = unit_naive(a, k);
          logits.push_back(scale * q.dot(k).item<double>());
          values.push_back(qkv[s].slice(0, Q + KV + g * dh, Q + KV + (g + 1) * dh));
        }
        const double mx = *std::max_element(logits.begin(), logits.end());
        double z = 0;
        for (double l : logits) z += std::exp(l - mx);
        auto acc = torch::zeros({dh}, x.options());
        for (size_t j = 0; j < logits.size(); ++j) acc += std::exp(logits[j] - mx) / z * values[j];
        acc = acc * a.head_mask[h].item<double>();
        y[b][t].slice(0, h * dh, (h + 1) * dh) = acc;
      }
    }
  }
  return linear_naive(y, a.out);
}

inline double activation_naive(Activation act, double s) {
  switch (act) {
    case Activation::kRelu:
      return std::max(0.0, s);
    case Activation::kRelu2:
      return s > 0 ? s * s : 0.0;
    case Activation::kRelu3:
      return s > 0 ? s * s * s : 0.0;
    case Activation::kGelu:
      return 0.5 * s * (1.0 + std::erf(s / std::sqrt(2.0)));
    case Activation::kSilu:
      return s / (1.0 + std::exp(-s));
    case Activation::kGeluTanh:
      return 0.5 * s * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (s + 0.044715 * s * s * s)));
  }
  return s;
}

// The feed-forward store of `o` (make_feed_forward), read through its registered parameters.
// x: (n, D) -> (n, D), loops over rows, hidden units and slots.
inline torch::Tensor feed_forward_naive(Store& f, const FeedForwardOptions& o,
                                        const torch::Tensor& x) {
  auto params = f.named_parameters();
  auto param = [&](const std::string& name) {
    return params.contains(name) ? params[name] : torch::Tensor();
  };
  auto linear = [&](const std::string& l, const torch::Tensor& v) {  // v (D,) -> (out,)
    auto y = param(l + ".weight").mv(v);
    return param(l + ".bias").defined() ? y + param(l + ".bias") : y;
  };
  const int64_t n = x.size(0), D = o.d_model();
  auto y = torch::zeros({n, D}, x.options());
  for (int64_t r = 0; r < n; ++r) {
    auto xr = x[r];
    if (o.kind() == FfnKind::kLearnedKv) {
      const int64_t H = o.n_heads(), dh = D / H, S = o.slots();
      auto q = linear("w1", xr);
      auto keys = param("keys"), values = param("values");
      auto heads = torch::zeros({D}, x.options());
      for (int64_t h = 0; h < H; ++h) {
        auto qh = q.slice(0, h * dh, (h + 1) * dh);
        std::vector<double> w(S);
        double z = 0;
        for (int64_t s = 0; s < S; ++s) {
          w[s] = std::exp(qh.dot(keys[h][s]).item<double>() / std::sqrt(double(dh)));
          z += w[s];
        }
        for (int64_t s = 0; s < S; ++s)
          heads.slice(0, h * dh, (h + 1) * dh) += w[s] / z * values[h][s];
      }
      y[r] = linear("w2", heads);
      continue;
    }
    auto w1 = param("w1.weight"), w2 = param("w2.weight"), w3 = param("w3.weight");
    auto b1 = param("w1.bias"), b2 = param("w2.bias"), b3 = param("w3.bias");
    const int64_t hidden = w1.size(0);
    auto acc = b2.defined() ? b2.clone() : torch::zeros({D}, x.options());
    for (int64_t j = 0; j < hidden; ++j) {
      auto pre = [&](const torch::Tensor& w, const torch::Tensor& b) {
        return w[j].dot(xr).item<double>() + (b.defined() ? b[j].item<double>() : 0.0);
      };
      double h = pre(w1, b1);
      if (o.kind() == FfnKind::kMlp) h = activation_naive(o.activation(), h);
      if (o.kind() == FfnKind::kGlu) h = activation_naive(o.activation(), h) * pre(w3, b3);
      acc += h * w2.select(1, j);
    }
    y[r] = acc;
  }
  return y;
}

}  // namespace recall::test
