#include "recall/analysis/fit.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "recall/core/error.h"
#include "recall/stores/theory.h"

namespace recall {

std::string to_string(FitKind kind) {
  switch (kind) {
    case FitKind::kMlpRelu:
      return "mlp-relu";
    case FitKind::kMlpRelu2:
      return "mlp-relu2";
    case FitKind::kSwiglu:
      return "swiglu";
    case FitKind::kLearnedKv:
      return "learned_kv";
  }
  return "?";
}

FitKind fit_kind_from_string(const std::string& name) {
  for (FitKind k : {FitKind::kMlpRelu, FitKind::kMlpRelu2, FitKind::kSwiglu, FitKind::kLearnedKv})
    if (to_string(k) == name) return k;
  throw std::invalid_argument(
      fmt::format("--kind {}: unknown, use mlp-relu, mlp-relu2, swiglu or learned_kv", name));
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

int64_t FitConfig::parameters() const {
  return (kind == FitKind::kSwiglu ? 3 : 2) * width * d_k;
}

StoreSpec FitConfig::constructed_spec() const {
  switch (kind) {
    case FitKind::kMlpRelu:
      return StoreSpec::parse("relu");
    case FitKind::kMlpRelu2:
      return StoreSpec::parse("relu2");
    case FitKind::kSwiglu:
      return StoreSpec::parse("swiglu");
    case FitKind::kLearnedKv:
      break;
  }
  return StoreSpec::parse("softmax", std::sqrt(static_cast<double>(d_k)));
}

namespace {

torch::Tensor unit_rows(int64_t n, int64_t d, at::Generator& gen) {
  auto x = torch::randn({n, d}, gen, torch::kFloat32);
  return x / x.norm(2, 1, true);
}

// The trainable store: k (N, d) keys (swiglu: gates), u (N, d) swiglu inputs, v (N, d) values.
struct Trainable {
  FitKind kind;
  torch::Tensor k, u, v;

  Trainable(FitKind kind_, int64_t N, int64_t d, at::Generator& gen) : kind(kind_) {
    k = torch::randn({N, d}, gen, torch::kFloat32);  // ||k|| ~ sqrt(d): k . x ~ N(0, 1)
    if (kind == FitKind::kSwiglu) u = torch::randn({N, d}, gen, torch::kFloat32);
    v = torch::randn({N, d}, gen, torch::kFloat32) / std::sqrt(static_cast<double>(N * d));
    for (auto* t : {&k, &u, &v})
      if (t->defined()) t->requires_grad_(true);
  }
  std::vector<torch::Tensor> parameters() const {
    return kind == FitKind::kSwiglu ? std::vector<torch::Tensor>{k, u, v}
                                    : std::vector<torch::Tensor>{k, v};
  }
  // x: (M, d) -> (M, d)
  torch::Tensor forward(const torch::Tensor& x) const {
    auto s = x.mm(k.t());  // (M, N) similarities
    torch::Tensor w;       // (M, N) recall weights
    switch (kind) {
      case FitKind::kMlpRelu:
        w = relu_pow(1)(s);
        break;
      case FitKind::kMlpRelu2:
        w = relu_pow(2)(s);
        break;
      case FitKind::kSwiglu:
        w = torch::silu(s) * x.mm(u.t());
        break;
      case FitKind::kLearnedKv:
        w = torch::softmax(s, 1);
        break;
    }
    return w.mm(v);
  }
};

constexpr double kPi = 3.14159265358979323846;

}  // namespace

FitTrial fit_memories(const FitConfig& config, int64_t M) {
  config.validate();
  check_arg(M >= 1, fmt::format("M = {}: must be >= 1", M));
  const int64_t d = config.d_k;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(config.seed);
  const auto keys = unit_rows(M, d, gen), values = unit_rows(M, d, gen);  // (M, d) each
  Trainable store(config.kind, config.width, d, gen);
  torch::optim::Adam adam(store.parameters(), torch::optim::AdamOptions(config.lr));
  torch::Tensor loss;
  for (int64_t step = 0; step < config.steps; ++step) {
    // cosine decay of the learning rate to 0 over the budget
    const double lr = 0.5 * config.lr * (1 + std::cos(kPi * step / config.steps));
    for (auto& group : adam.param_groups())
      static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    adam.zero_grad();
    loss = (store.forward(keys) - values).square().sum(1).mean();
    loss.backward();
    adam.step();
  }
  torch::NoGradGuard no_grad;
  // nearest-value decoding: argmax_l f(x_j) . v_l (all v unit, so the largest cosine) must be j
  const auto predicted = store.forward(keys).mm(values.t()).argmax(1);  // (M,)
  const auto hits = predicted.eq(torch::arange(M, torch::kInt64)).sum().item<int64_t>();
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
  r.theory = theory_capacity(config.constructed_spec(), config.d_k);
  r.constructed = std::min(static_cast<double>(config.width), r.theory.value_or(0.0));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace recall
