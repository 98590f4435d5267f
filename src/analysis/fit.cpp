#include "recall/analysis/fit.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/stores/theory.h"

namespace recall {

std::string to_string(const FitKind& kind) {
  return feed_forward_name(kind.ffn, kind.activation);
}

FitKind fit_kind_from_string(const std::string& name) {
  try {
    auto [ffn, activation] = feed_forward_from_name(name);
    return {ffn, activation};
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("--kind {}: {}", name, e.what()));
  }
}

void FitConfig::validate() const {
  check_arg(width >= 1 && width <= 65536, fmt::format("--width {}: must be in [1, 65536]", width));
  check_arg(d_k >= 2 && d_k <= 4096, fmt::format("--dk {}: must be in [2, 4096]", d_k));
  check_arg(steps >= 1 && steps <= 1000000,
            fmt::format("--steps {}: must be in [1, 1000000]", steps));
  check_arg(lr > 0 && lr <= 1, fmt::format("--lr {}: must be in (0, 1]", lr));
  check_arg(target > 0 && target <= 1, fmt::format("--target {}: must be in (0, 1]", target));
  check_arg(m_max >= 0 && m_max <= 100000,
            fmt::format("--m-max {}: must be in [0, 100000] (0: 4 x parameters)", m_max));
  check_arg(max_memories() <= 100000,
            fmt::format("--width {} at --dk {}: 4 x parameters = {} memories exceeds 100000; "
                        "give --m-max",
                        width, d_k, max_memories()));
}

FeedForwardOptions FitConfig::store_options() const {
  // the module a block builds for this kind, at width N instead of mult d (learned_kv: N slots,
  // one head)
  return FeedForwardOptions(d_k)
      .kind(kind.ffn)
      .activation(kind.activation)
      .hidden(width)
      .slots(width);
}

std::shared_ptr<Store> FitConfig::make_store(at::Generator& gen) const {
  auto store = make_feed_forward(store_options());
  // the scale of a written store: values ~ N(0, 1 / (N d)) entries
  const double value_std = 1.0 / std::sqrt(static_cast<double>(width * d_k));
  feed_forward_kind(kind.ffn).start_for_fit(*store, d_k, value_std, gen);
  return store;
}

int64_t FitConfig::parameters() const {
  return feed_forward_num_parameters(store_options());
}

double FitConfig::estimate_ram(std::string* breakdown) const {
  const auto M = static_cast<double>(max_memories()), d = static_cast<double>(d_k);
  // per memory, kept for the backward
  const double hidden =
      static_cast<double>(feed_forward_kind(kind.ffn).activation_width(store_options()));
  const double params = static_cast<double>(parameters());
  const double data = 4 * (2 * M * d + 3 * M * hidden), scores = 4 * M * M;
  const double store = 4 * 4 * params;  // weights, gradients, two moments
  if (breakdown)
    *breakdown = fmt::format(
        "{} of memories and activations and {} of recall scores at M = {}, "
        "{} for the store",
        format_bytes(data), format_bytes(scores), max_memories(), format_bytes(store));
  return data + scores + store;
}

std::optional<StoreSpec> FitConfig::constructed_spec() const {
  return written_store_spec(kind.ffn, kind.activation, std::sqrt(static_cast<double>(d_k)));
}

namespace {

torch::Tensor unit_rows(int64_t n, int64_t d, at::Generator& gen) {
  auto x = torch::randn({n, d}, gen, torch::kFloat32);
  return x / x.norm(2, 1, true);
}

constexpr double kPi = 3.14159265358979323846;

}  // namespace

FitTrial fit_memories(const FitConfig& config, int64_t M) {
  config.validate();
  check_arg(M >= 1, fmt::format("M = {}: must be >= 1", M));
  const int64_t d = config.d_k;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(config.seed);
  const auto keys = unit_rows(M, d, gen).to(config.device);  // (M, d)
  const auto values = unit_rows(M, d, gen).to(config.device);
  const auto store = config.make_store(gen);
  store->to(config.device);
  torch::optim::Adam adam(store->parameters(), torch::optim::AdamOptions(config.lr));
  torch::Tensor loss;
  for (int64_t step = 0; step < config.steps; ++step) {
    // cosine decay of the learning rate to 0 over the budget
    const double lr = 0.5 * config.lr * (1 + std::cos(kPi * step / config.steps));
    for (auto& group : adam.param_groups())
      static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    adam.zero_grad();
    loss = (store->forward(keys) - values).square().sum(1).mean();
    loss.backward();
    adam.step();
  }
  torch::NoGradGuard no_grad;
  // nearest-value decoding: argmax_l f(x_j) . v_l (all v unit, so the largest cosine) must be j
  const auto predicted = store->forward(keys).mm(values.t()).argmax(1);  // (M,)
  const auto hits = predicted.eq(torch::arange(M, predicted.options())).sum().item<int64_t>();
  return {M, static_cast<double>(hits) / static_cast<double>(M), loss.item<double>()};
}

FitResult fit_capacity(const FitConfig& config) {
  config.validate();
  const auto start = std::chrono::steady_clock::now();
  FitResult r;
  r.config = config;
  auto passes = [&](int64_t M) {
    r.trials.push_back(fit_memories(config, M));
    return r.trials.back().recalled >= config.target;
  };
  // Brackets: doubling from M = N (or halving when N already fails), then integer bisection at
  // the geometric midpoint. lo passes, hi fails (0: not found yet).
  const int64_t m_max = config.max_memories();
  int64_t lo = 0, hi = 0, M = std::min(std::max<int64_t>(2, config.width), m_max);
  if (passes(M)) {
    lo = M;
    while (hi == 0 && lo < m_max) {
      M = std::min(2 * lo, m_max);
      (passes(M) ? lo : hi) = M;
    }
  } else {
    hi = M;
    while (lo == 0 && hi > 1) {
      M = hi / 2;
      (passes(M) ? lo : hi) = M;
    }
  }
  while (hi > 0 && hi - lo > 1) {
    const auto mid = static_cast<int64_t>(
        std::llround(std::sqrt(static_cast<double>(std::max<int64_t>(lo, 1)) * hi)));
    M = std::clamp(mid, lo + 1, hi - 1);
    (passes(M) ? lo : hi) = M;
  }
  r.capacity = lo;
  r.capped = hi == 0;
  r.parameters = config.parameters();
  const double m = static_cast<double>(lo), p = static_cast<double>(r.parameters);
  r.memories_per_param = m / p;
  r.bits_per_param = lo > 1 ? m * std::log2(m) / p : 0.0;
  if (const auto spec = config.constructed_spec()) {
    r.theory = theory_capacity(*spec, config.d_k);
    if (r.theory) r.constructed = std::min(static_cast<double>(config.width), *r.theory);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace recall
