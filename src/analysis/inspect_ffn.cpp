// Feed-forward layers as key-value stores: each key queried through the layer's own weights.
#include <fmt/format.h>

#include <cmath>

#include "recall/analysis/inspect.h"
#include "recall/stores/feed_forward.h"
#include "recall/stores/glu.h"
#include "recall/stores/learned_kv.h"
#include "recall/stores/mlp.h"
#include "recall/stores/theory.h"

namespace recall {

torch::Tensor self_recall_isr(const torch::Tensor& weights, const torch::Tensor& values) {
  const int64_t Q = weights.size(0);
  auto w_jj = weights.narrow(1, 0, Q).diagonal();            // (Q,) the signal's weight
  auto signal = w_jj.unsqueeze(1) * values.narrow(0, 0, Q);  // (Q, d_v) w_jj v_j
  auto interference = weights.mm(values) - signal;           // (Q, d_v) sum_{i != j} w_i v_i
  return interference.norm(2, 1) / signal.norm(2, 1);
}

namespace {

torch::Tensor unit_rows(const torch::Tensor& k) {
  return k / k.norm(2, 1, true).clamp_min(1e-300);
}

// Accumulates the ISRs and key coherences of one or more stores (learned_kv: one per head).
struct Accumulator {
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
  auto copy = clone_store(ffn_store);
  as_module(copy)->to(torch::kCPU, torch::kFloat64);  // a one-off in float64: on the CPU
  Store& ffn = *copy;
  FfnStoreReport r;
  r.layer = layer;
  Accumulator acc;
  if (auto* kv = dynamic_cast<LearnedKvStoreImpl*>(&ffn)) {
    const int64_t H = kv->options.n_heads(), dh = kv->d_head();
    auto keys = ffn.keys(), values = ffn.values();  // (H, S, dh)
    for (int64_t h = 0; h < H; ++h) {
      // q = sqrt(dh) k_j / ||k_j||: logits q . k_i / sqrt(dh) = k_hat_j . k_i
      auto w = torch::softmax(unit_rows(keys[h]).mm(keys[h].t()), 1);  // (S, S)
      acc.add(keys[h], w, values[h]);
    }
    r.kind = "learned_kv";
    r.keys = H * keys.size(1);
    r.dim = dh;
    // unit queries see sharpness ||k_i||: the softmax store at beta = mean key norm
    const double beta = keys.norm(2, 2).mean().item<double>();
    r.theory_store = fmt::format("softmax(beta={:.3g})", beta);
    r.theory = theory_capacity(*written_store_spec(FfnKind::kLearnedKv, {}, beta), dh);
  } else {
    auto keys = ffn.keys();      // (N, D) first-layer rows (glu: the gate rows)
    auto values = ffn.values();  // (N, D) second-layer columns
    const int64_t D = keys.size(1);
    auto x = unit_rows(keys) * std::sqrt(static_cast<double>(D));  // (N, D) queries
    auto w = ffn.recall_weights(x);                                // (N, N) hidden activations
    FfnKind kind = FfnKind::kLinear;
    Activation activation = Activation::kRelu;
    if (auto* mlp = dynamic_cast<MlpStoreImpl*>(&ffn)) {
      kind = FfnKind::kMlp;
      activation = mlp->options.activation();
    } else if (auto* glu = dynamic_cast<GluStoreImpl*>(&ffn)) {
      kind = FfnKind::kGlu;
      activation = glu->options.gate();
    }
    r.kind = feed_forward_name(kind, activation);
    const auto spec = written_store_spec(kind, activation, 0.0);
    const bool gelu = kind == FfnKind::kMlp && activation == Activation::kGelu;
    r.theory_store = spec ? spec->name() : gelu ? "gelu" : "n/a";
    if (spec) r.theory = theory_capacity(*spec, D);
    if (gelu) r.theory = gelu_capacity(D);  // no written gelu store: the theory by quadrature
    acc.add(keys, w, values);
    r.keys = keys.size(0);
    r.dim = D;
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
