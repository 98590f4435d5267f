// Sharpness rules for softmax stores (docs/science.md §4). Each rule sets the logit scale beta for
// a query that sees M memories, relative to the base beta_0 at a reference length L:
//   none : beta_0
//   su   : beta_0 * ln M / ln L                       (entropy invariance)
//   qwen : beta_0 * max(1, ln M / ln L)               (LogN-Scaling)
//   yarn : beta_0 * (0.1 ln(M/L) + 1)^2 for M > L     (YaRN temperature)
//   ssmax: s * ln M, s learned per head, initialised to beta_0 / ln L (so it starts equal to su)
#pragma once
#include <string>
#include <vector>

#include "recall/core/torch.h"

namespace recall {

enum class BetaRule { kNone, kSu, kQwen, kYarn, kSsmax };

std::string to_string(BetaRule rule);
// Throws std::invalid_argument naming the value and the accepted names.
BetaRule beta_rule_from_string(const std::string& name);
const std::vector<BetaRule>& all_beta_rules();

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
