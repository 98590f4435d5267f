#include "recall/stores/beta_rule.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

#include "recall/core/enum_names.h"
#include "recall/core/error.h"

namespace recall {

namespace {
constexpr std::array<const char*, 5> kNames = {"none", "su", "qwen", "yarn", "ssmax"};

void check_common(double L, double beta0) {
  check_arg(std::isfinite(L) && L >= 2,
            fmt::format("ref_len = {}: must be a length >= 2 (the training length)", L));
  check_arg(std::isfinite(beta0) && beta0 > 0,
            fmt::format("beta = {}: must be finite and > 0", beta0));
}
}  // namespace

std::string to_string(BetaRule rule) {
  return enum_name(kNames, rule);
}

BetaRule beta_rule_from_string(const std::string& name) {
  return enum_from_name<BetaRule>(kNames, name, "beta rule");
}

const std::vector<BetaRule>& all_beta_rules() {
  static const std::vector<BetaRule> rules = {BetaRule::kNone, BetaRule::kSu, BetaRule::kQwen,
                                              BetaRule::kYarn, BetaRule::kSsmax};
  return rules;
}

double beta_for(BetaRule rule, double M, double L, double beta0) {
  check_common(L, beta0);
  check_arg(std::isfinite(M) && M >= 1, fmt::format("M = {}: must be >= 1", M));
  const double ratio = std::log(M) / std::log(L);
  switch (rule) {
    case BetaRule::kNone:
      return beta0;
    case BetaRule::kSu:
    case BetaRule::kSsmax:
      return beta0 * ratio;
    case BetaRule::kQwen:
      return beta0 * std::max(1.0, ratio);
    case BetaRule::kYarn: {
      if (M <= L) return beta0;
      const double t = 0.1 * std::log(M / L) + 1.0;
      return beta0 * t * t;
    }
  }
  return beta0;
}

torch::Tensor beta_for(BetaRule rule, const torch::Tensor& M, double L, double beta0) {
  check_common(L, beta0);
  check_arg(M.numel() == 0 || M.min().item<double>() >= 1, "M: every memory count must be >= 1");
  const double lnL = std::log(L);
  switch (rule) {
    case BetaRule::kNone:
      return torch::full_like(M, beta0);
    case BetaRule::kSu:
    case BetaRule::kSsmax:
      return beta0 * torch::log(M) / lnL;
    case BetaRule::kQwen:
      return beta0 * torch::clamp_min(torch::log(M) / lnL, 1.0);
    case BetaRule::kYarn: {
      auto t = 0.1 * torch::log(torch::clamp_min(M / L, 1.0)) + 1.0;
      return beta0 * t * t;
    }
  }
  return torch::full_like(M, beta0);
}

SsmaxScaleImpl::SsmaxScaleImpl(SsmaxScaleOptions options_) : options(options_) {
  reset();
}

void SsmaxScaleImpl::reset() {
  check_common(options.ref_len(), options.beta0());
  check_arg(options.heads() >= 1, fmt::format("heads = {}: must be >= 1", options.heads()));
  scale = register_parameter(
      "scale", torch::full({options.heads()}, options.beta0() / std::log(options.ref_len())));
}

torch::Tensor SsmaxScaleImpl::forward(const torch::Tensor& M) {
  return scale.unsqueeze(1) * torch::log(M.to(scale.dtype())).unsqueeze(0);  // (heads, T)
}

}  // namespace recall
