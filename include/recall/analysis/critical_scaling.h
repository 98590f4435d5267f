// Two published criteria for how fast the sharpness must grow with the context, computed from the
// same reading at the training length as the ISR forecast (isr_forecast.h), so that the three
// prescriptions can be set side by side on one model (docs/science.md §8).
//
// Both are stated for logits beta s, s = q^ . k the score (a cosine with unit q and k), and both
// are translated into the c of log:c, beta(n) = beta_0 (1 + c ln(n / L)) past the training length
// L, as the smallest c that meets the criterion at the target length:
//
// - Critical scaling (Chen, Lin, Polyanskiy and Rigollet, "Critical attention scaling in
//   long-context transformers", arXiv 2510.05554): tokens of pairwise correlation rho, logits
//   beta_n <y_i, y_j>. Attention stays sparse and content-adaptive iff beta_n >= gamma_c ln n with
//   gamma_c = 1 / (1 - rho): the read token's weight e^beta against n others' n e^(beta rho). In a
//   trained head the read key's score and the others' differ by a spread of gaps; rho here is
//   1 - their mean, so the criterion is beta >= ln n / mean gap, n the tokens at the target.
// - Gap counting (Hayase and Karakida, arXiv 2605.12697): per attention row, N(g) counts the keys
//   within g of the read key's score, and the critical inverse temperature is the upper-tail
//   accumulation scale beta* = max_g ln N(g) / g: above it the read key outweighs the keys within
//   every gap of it (N(g) e^(-beta g) <= 1), below it some band of near competitors does not. At m
//   times the length a row holds its own keys and t_m - t more from its head's pool, as the ISR
//   forecast's (query_isr); the criterion is met when beta at t_m reaches beta* for the median
//   query of the held heads.
//
// The essay's criterion is the third: ISR^2 = sum_j e^(-2 beta g_j) <= level^2. With n equal gaps
// g it asks beta >= (ln n - 2 ln level) / (2 g), half of the slope in ln n that the weight-mass
// criteria ask: interference from keys whose values are random adds in quadrature, while a mass
// criterion counts the weights themselves.
#pragma once
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "recall/analysis/isr_forecast.h"

namespace recall {

struct CriticalScaling {
  int64_t target = 0;  // the multiple of the training length the c's are for
  // the heads read: those that hold their memories at 1x (ISR < 1); 0 where the criteria do not
  // apply (no query read, or a mean gap <= 0), and the rest is then unset
  int64_t heads = 0;
  double beta = 0;  // their mean multiplier at the training length (times |q|)
  // Chen et al.: rho = 1 - the mean score gap of the read key over the others (with unit q and k
  // a token correlation), gamma_c = 1 / (1 - rho), and the smallest c whose beta at the target's
  // last position reaches gamma_c ln n, n = target * L tokens; none where even c = 1,000 falls
  // short
  double rho = 0, gamma_c = 0;
  std::optional<double> c_critical;
  // Hayase and Karakida: the median over the held heads' queries of beta* = max_g ln N(g) / g, at
  // each multiple of `multiples` (infinite where a key scores at or above the read one: no beta
  // concentrates that row on it), and the smallest c at which the median query's beta reaches its
  // beta* at the target
  std::vector<int64_t> multiples;
  std::vector<double> beta_gap_count;
  std::optional<double> c_gap_count;
};

// beta* = max_g ln N(g) / g of one attention row, from the gaps g_j = s_read - s_j of its other
// keys, ascending: the largest ln k / g_(k), ties counted together. Infinite where a gap is <= 0
// (a key at or above the read one takes the weight from it at any beta); 0 for one other key.
double gap_count_beta(const std::vector<double>& sorted_gaps);

// Both criteria on `reading`, over the recalling heads in `held` ((layer, head), those with ISR < 1
// at 1x), at reading.multiples with the c's for the last of them.
CriticalScaling critical_scaling(Transformer& model, const ForecastReading& reading,
                                 const std::set<std::pair<int64_t, int64_t>>& held);

}  // namespace recall
