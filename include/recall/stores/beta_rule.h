// Sharpness rules for softmax stores (docs/science.md §4). Each rule sets the logit scale beta for
// a query that sees M memories, relative to the base beta_0 at a reference length L (the training
// length), as beta_0 times the rule's factor:
//   none : 1
//   su   : ln M / ln L                              (entropy invariance)
//   qwen : max(1, ln M / ln L)                      (LogN-Scaling)
//   yarn : (0.1 ln(M/L) + 1)^2 for M > L, else 1    (YaRN temperature)
//   ssmax: s ln M, s learned per head, initialised to beta_0 / ln L (so it starts equal to su)
//   log:c: 1 + c ln(M/L) for M > L, else 1          (a stated growth: c = 1 / ln L is qwen)
// Each rule is one row of beta_rules(); adding a rule is adding a row (README, "Adding a rule").
#pragma once
#include <string>
#include <vector>

#include "recall/core/torch.h"

namespace recall {

enum class BetaRuleKind { kNone, kSu, kQwen, kYarn, kSsmax, kLog };

// A rule: its kind and, for a rule that takes one (log), its coefficient c. Written "log:0.4";
// the others by name alone.
struct BetaRule {
  BetaRuleKind kind = BetaRuleKind::kNone;
  double c = 0;
  static const BetaRule kNone, kSu, kQwen, kYarn, kSsmax;
  // log:c, beta(M) = beta_0 (1 + c ln(M / L)) past L. Throws std::invalid_argument unless c is
  // finite and >= 0.
  static BetaRule log(double c);
};
inline constexpr BetaRule BetaRule::kNone{BetaRuleKind::kNone, 0};
inline constexpr BetaRule BetaRule::kSu{BetaRuleKind::kSu, 0};
inline constexpr BetaRule BetaRule::kQwen{BetaRuleKind::kQwen, 0};
inline constexpr BetaRule BetaRule::kYarn{BetaRuleKind::kYarn, 0};
inline constexpr BetaRule BetaRule::kSsmax{BetaRuleKind::kSsmax, 0};
constexpr bool operator==(BetaRule a, BetaRule b) {
  return a.kind == b.kind && a.c == b.c;
}
constexpr bool operator!=(BetaRule a, BetaRule b) {
  return !(a == b);
}
constexpr bool operator<(BetaRule a, BetaRule b) {
  return a.kind != b.kind ? a.kind < b.kind : a.c < b.c;
}

// One row of the table of rules.
struct BetaRuleRow {
  BetaRuleKind kind;
  const char* name;
  const char* factor_text;  // the factor beta(M) / beta_0, as help and docs print it
  bool learns;              // a parameter per head (ssmax): trained with the model
  bool takes_c;             // written name:c
  // beta(M) = beta_0 for M <= L: the rule changes nothing at the training length, so a model
  // trained without a rule can be read under it at longer lengths
  bool none_up_to_training_length;
  // The factor for memory counts M (float64, >= 1) at training length L and coefficient c; the
  // one formula of the rule, which the scalar form reads too. For a learned rule, its initial
  // value.
  torch::Tensor (*factor)(const torch::Tensor& M, double L, double c);
};
const std::vector<BetaRuleRow>& beta_rules();
const BetaRuleRow& row_of(BetaRule rule);

std::string to_string(BetaRule rule);
// "none", "su", ..., "log:0.4". Throws std::invalid_argument naming the value and the accepted
// names.
BetaRule beta_rule_from_string(const std::string& name);
// The rules without a coefficient (log is a family: name one with its c).
const std::vector<BetaRule>& all_beta_rules();
// The rules without a coefficient, none aside, that leave beta unchanged up to the training length
// (qwen, yarn): training under them is training under none, bit for bit, so a run trained under
// none is read under them at longer lengths.
const std::vector<BetaRule>& rules_equal_to_none_within_training_length();
// The accepted names, for help: "none, su, qwen, yarn, ssmax, log:C".
std::string beta_rule_names();

// beta for M memories. For ssmax this is its initial value (beta_0 ln M / ln L).
// Requires M >= 1, L >= 2, beta_0 > 0.
double beta_for(BetaRule rule, double M, double L, double beta0);

// Elementwise over a tensor of memory counts M (any shape, >= 1); same dtype as M.
torch::Tensor beta_for(BetaRule rule, const torch::Tensor& M, double L, double beta0);

// The learned scale of ssmax: one s per head, beta_h(M) = s_h * ln M.
struct SsmaxScaleOptions {
  SsmaxScaleOptions(int64_t heads, double beta0, double ref_len)
      : heads_(heads), beta0_(beta0), ref_len_(ref_len) {}
  TORCH_ARG(int64_t, heads);
  TORCH_ARG(double, beta0);
  TORCH_ARG(double, ref_len);
};

class SsmaxScaleImpl : public torch::nn::Cloneable<SsmaxScaleImpl> {
 public:
  explicit SsmaxScaleImpl(SsmaxScaleOptions options);
  void reset() override;
  // M: (T,) memory counts -> beta: (heads, T)
  torch::Tensor forward(const torch::Tensor& M);
  SsmaxScaleOptions options;
  torch::Tensor scale;  // (heads,)
};
TORCH_MODULE(SsmaxScale);

}  // namespace recall
