#include "recall/stores/beta_rule.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "recall/core/error.h"

namespace recall {

namespace {

void check_common(double L, double beta0) {
  check_arg(std::isfinite(L) && L >= 2,
            fmt::format("ref_len = {}: must be a length >= 2 (the training length)", L));
  check_arg(std::isfinite(beta0) && beta0 > 0,
            fmt::format("beta = {}: must be finite and > 0", beta0));
}

torch::Tensor su_factor(const torch::Tensor& M, double L, double /*c*/) {
  return torch::log(M) / std::log(L);
}

}  // namespace

BetaRule BetaRule::log(double c) {
  if (!(std::isfinite(c) && c >= 0))
    throw std::invalid_argument(
        fmt::format("beta rule log:{}: its coefficient must be a number >= 0, as in log:0.4", c));
  return {BetaRuleKind::kLog, c};
}

const std::vector<BetaRuleRow>& beta_rules() {
  static const std::vector<BetaRuleRow> rows = {
      {BetaRuleKind::kNone, "none", "1", false, false, true,
       [](const torch::Tensor& M, double, double) { return torch::ones_like(M); }},
      {BetaRuleKind::kSu, "su", "ln M / ln L", false, false, false, su_factor},
      // max(1, ln M / ln L): su past L, where ln M / ln L > 1
      {BetaRuleKind::kQwen, "qwen", "max(1, ln M / ln L)", false, false, true, su_factor},
      {BetaRuleKind::kYarn, "yarn", "(0.1 ln(M/L) + 1)^2", false, false, true,
       [](const torch::Tensor& M, double L, double) {
         auto t = 0.1 * torch::log(M / L) + 1.0;
         return t * t;
       }},
      {BetaRuleKind::kSsmax, "ssmax", "s ln M, s learned from 1 / ln L", true, false, false,
       su_factor},
      {BetaRuleKind::kLog, "log", "1 + c ln(M/L)", false, true, true,
       [](const torch::Tensor& M, double L, double c) { return 1.0 + c * torch::log(M / L); }},
  };
  return rows;
}

const BetaRuleRow& row_of(BetaRule rule) {
  for (const BetaRuleRow& r : beta_rules())
    if (r.kind == rule.kind) return r;
  throw std::logic_error("beta rule: a kind without a row");
}

std::string to_string(BetaRule rule) {
  const BetaRuleRow& r = row_of(rule);
  return r.takes_c ? fmt::format("{}:{}", r.name, rule.c) : r.name;
}

BetaRule beta_rule_from_string(const std::string& name) {
  const size_t colon = name.find(':');
  const std::string head = name.substr(0, colon);
  for (const BetaRuleRow& r : beta_rules()) {
    if (head != r.name) continue;
    if (!r.takes_c && colon == std::string::npos) return {r.kind, 0};
    if (r.takes_c && colon != std::string::npos) {
      const std::string text = name.substr(colon + 1);
      char* end = nullptr;
      const double c = std::strtod(text.c_str(), &end);
      if (!text.empty() && end == text.c_str() + text.size() && std::isfinite(c) && c >= 0)
        return {r.kind, c};
    }
    break;
  }
  throw std::invalid_argument(
      fmt::format("beta rule '{}' is unknown: use one of {}", name, beta_rule_names()));
}

const std::vector<BetaRule>& all_beta_rules() {
  static const std::vector<BetaRule> rules = [] {
    std::vector<BetaRule> out;
    for (const BetaRuleRow& r : beta_rules())
      if (!r.takes_c) out.push_back({r.kind, 0});
    return out;
  }();
  return rules;
}

const std::vector<BetaRule>& rules_equal_to_none_within_training_length() {
  static const std::vector<BetaRule> rules = [] {
    std::vector<BetaRule> out;
    for (const BetaRuleRow& r : beta_rules())
      if (!r.takes_c && r.none_up_to_training_length && r.kind != BetaRuleKind::kNone)
        out.push_back({r.kind, 0});
    return out;
  }();
  return rules;
}

std::string beta_rule_names() {
  std::string out;
  for (const BetaRuleRow& r : beta_rules())
    out += (out.empty() ? "" : ", ") + std::string(r.name) + (r.takes_c ? ":C (C >= 0)" : "");
  return out;
}

double beta_for(BetaRule rule, double M, double L, double beta0) {
  check_common(L, beta0);
  check_arg(std::isfinite(M) && M >= 1, fmt::format("M = {}: must be >= 1", M));
  return beta_for(rule, torch::tensor(M, torch::kFloat64), L, beta0).item<double>();
}

torch::Tensor beta_for(BetaRule rule, const torch::Tensor& M, double L, double beta0) {
  check_common(L, beta0);
  check_arg(M.numel() == 0 || M.min().item<double>() >= 1, "M: every memory count must be >= 1");
  const BetaRuleRow& r = row_of(rule);
  auto f = r.factor(M, L, rule.c);
  if (r.none_up_to_training_length) f = torch::where(M <= L, torch::ones_like(f), f);
  return beta0 * f;
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
