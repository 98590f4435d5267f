#include "recall/analysis/attention_stats.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "recall/models/activation_cache.h"

namespace recall {

torch::Tensor softmax_logit_grad(const torch::Tensor& w, const torch::Tensor& g) {
  return w * (g - (w * g).sum(-1, true));
}

AttentionStats attention_stats(Transformer& model, const Batch& batch) {
  ActivationCache cache;
  auto logits = model->forward(batch.x, &cache);  // (B, T, V)
  auto loss =
      torch::nn::functional::cross_entropy(logits.index({batch.mask}), batch.y.index({batch.mask}));
  std::vector<torch::Tensor> weights;
  for (int64_t i = 0; i < model->config.n_layers; ++i)
    weights.push_back(cache.at(fmt::format("blocks.{}.attn.weights", i)));  // (B, H, T, N + T)
  const auto grads = torch::autograd::grad({loss}, weights);
  AttentionStats s;
  double g2 = 0, rows = 0;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < weights.size(); ++i) {
    const auto& w = weights[i];
    auto dz = softmax_logit_grad(w, grads[i]);  // (B, H, T, N + T)
    g2 += dz.square().sum().item<double>();
    s.entropy += -torch::special_xlogy(w, w).sum().item<double>();
    const int64_t T = w.size(2), N = w.size(3) - T;
    auto seen = torch::arange(N + 1, N + T + 1, torch::kFloat64);  // keys seen by each query (T,)
    s.uniform_entropy += torch::log(seen).sum().item<double>() * static_cast<double>(w.size(0)) *
                         static_cast<double>(w.size(1));
    rows += static_cast<double>(w.size(0) * w.size(1) * T);
  }
  s.grad_norm = std::sqrt(g2);
  s.entropy /= rows;
  s.uniform_entropy /= rows;
  return s;
}

}  // namespace recall
