// Feed-forward layers as key-value stores: each key queried through the layer's own weights.
#include "recall/analysis/inspect_ffn.h"

#include <fmt/format.h>

#include <cmath>

#include "recall/core/error.h"
#include "recall/stores/feed_forward.h"
#include "recall/stores/isr.h"
#include "recall/stores/theory.h"

namespace recall {

namespace {

torch::Tensor unit_rows(const torch::Tensor& k) {  // along the last dimension
  return k / k.norm(2, -1, true).clamp_min(1e-300);
}

// Accumulates the ISRs and key coherences of one or more stores (learned_kv: one per head).
struct IsrTally {
  std::vector<double> isr;
  double coherence_sum = 0, coherence_max = 0;
  int64_t coherence_n = 0;

  // keys (N, d), weights (N, N) of the N queries, values (N, d_v)
  void add(const torch::Tensor& keys, const torch::Tensor& weights, const torch::Tensor& values) {
    auto x = self_recall_isr(weights, values).contiguous();
    isr.insert(isr.end(), x.data_ptr<double>(), x.data_ptr<double>() + x.numel());
    const int64_t N = keys.size(0);
    if (N < 2) return;
    auto k_hat = unit_rows(keys);
    auto off = k_hat.mm(k_hat.t()).abs().masked_select(~torch::eye(N, torch::kBool));  // i != j
    coherence_sum += off.sum().item<double>();
    coherence_max = std::max(coherence_max, off.max().item<double>());
    coherence_n += off.numel();
  }
};

// Capacity 1 + g(1)^2 / E[g(s)^2] of unit random keys in R^d (theory.h) for the exact GELU.
double gelu_capacity(int64_t d) {
  auto gelu = [](double s) { return 0.5 * s * (1 + std::erf(s / std::sqrt(2.0))); };
  return 1 +
         gelu(1) * gelu(1) / similarity_expectation([&](double s) { return gelu(s) * gelu(s); }, d);
}

}  // namespace

FfnStoreReport inspect_feed_forward(const std::shared_ptr<Store>& ffn_store, int64_t layer) {
  torch::NoGradGuard no_grad;
  const auto o = ffn_store->feed_forward_options();
  check_arg(o.has_value(), "inspect: the store is not a feed-forward layer");
  auto copy = clone_store(ffn_store);
  copy->to(torch::kCPU, torch::kFloat64);  // a one-off in float64: on the CPU
  Store& ffn = *copy;
  FfnStoreReport r;
  r.layer = layer;
  r.kind = feed_forward_name(o->kind(), o->activation());
  // One store, or one per head (learned_kv): keys (H, N, d), values (H, N, d_v).
  const bool per_head = ffn.keys().dim() == 3;
  auto keys = per_head ? ffn.keys() : ffn.keys().unsqueeze(0);
  auto values = per_head ? ffn.values() : ffn.values().unsqueeze(0);
  const int64_t H = keys.size(0), d = keys.size(2);
  // q_j = sqrt(d) k_j / ||k_j||, the norm of an RMS-normalised input (learned_kv: logits
  // q_j . k_i / sqrt(d) = k_hat_j . k_i)
  auto q = unit_rows(keys) * std::sqrt(static_cast<double>(d));                 // (H, N, d)
  auto w = per_head ? ffn.key_weights(q) : ffn.key_weights(q[0]).unsqueeze(0);  // (H, N, N)
  IsrTally acc;
  for (int64_t h = 0; h < H; ++h) acc.add(keys[h], w[h], values[h]);
  r.keys = H * keys.size(1);
  r.dim = d;
  if (o->kind() == FfnKind::kLearnedKv) {
    // unit queries see sharpness ||k_i||: the softmax store at beta = mean key norm
    const double beta = keys.norm(2, 2).mean().item<double>();
    r.theory_store = fmt::format("softmax(beta={:.3g})", beta);
    r.theory = theory_capacity(*written_store_spec(FfnKind::kLearnedKv, {}, beta), d);
  } else {
    const auto spec = written_store_spec(o->kind(), o->activation(), 0.0);
    const bool gelu = o->kind() == FfnKind::kMlp && o->activation() == Activation::kGelu;
    r.theory_store = spec ? spec->name() : gelu ? "gelu" : "n/a";
    if (spec) r.theory = theory_capacity(*spec, d);
    if (gelu) r.theory = gelu_capacity(d);  // no written gelu store: the theory by quadrature
  }
  r.isr = summarize(acc.isr);
  int64_t below = 0;
  for (double v : acc.isr) below += v < 1.0;
  r.recalled = acc.isr.empty() ? 0.0 : static_cast<double>(below) / acc.isr.size();
  r.coherence_mean = acc.coherence_n ? acc.coherence_sum / acc.coherence_n : 0.0;
  r.coherence_max = acc.coherence_max;
  return r;
}

}  // namespace recall
