#include "recall/analysis/critical_scaling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace recall {

double gap_count_beta(const std::vector<double>& sorted_gaps) {
  if (!sorted_gaps.empty() && sorted_gaps.front() <= 0)
    return std::numeric_limits<double>::infinity();
  double best = 0;
  const size_t n = sorted_gaps.size();
  for (size_t k = 0; k < n; ++k) {
    if (k + 1 < n && sorted_gaps[k + 1] == sorted_gaps[k]) continue;  // N(g) counts every tie
    best = std::max(best, std::log(static_cast<double>(k + 1)) / sorted_gaps[k]);
  }
  return best;
}

namespace {

// One held query's row at multiple m: the score gaps of its own keys and of the t_m - t the pool
// adds, ascending.
std::vector<double> row_gaps(const ForecastQuery& q, int64_t m, const std::vector<double>& pool,
                             uint64_t draws) {
  std::vector<double> g;
  for (double d : q.d) g.push_back(-d / q.beta);  // d_j = beta (s_j - s_read)
  const int64_t n = m * (q.t + 1) - 1 - q.t;
  if (!pool.empty())
    for (int64_t i = 0; i < n; ++i) g.push_back(q.read - pool_draw(pool, draws, i));
  std::sort(g.begin(), g.end());
  return g;
}

}  // namespace

CriticalScaling critical_scaling(Transformer& model, const ForecastReading& reading,
                                 const std::set<std::pair<int64_t, int64_t>>& held) {
  CriticalScaling out;
  out.multiples = reading.multiples;
  out.target = reading.multiples.back();
  std::vector<const ForecastQuery*> queries;
  double gap_sum = 0, beta_sum = 0;
  int64_t gaps = 0;
  for (const ForecastQuery& q : reading.queries) {
    if (held.count({q.layer, q.head}) == 0 || !(q.beta > 0)) continue;
    queries.push_back(&q);
    beta_sum += q.beta;
    for (double d : q.d) gap_sum += -d / q.beta;
    gaps += static_cast<int64_t>(q.d.size());
  }
  const double mean_gap = gaps > 0 ? gap_sum / static_cast<double>(gaps) : 0.0;
  // none read, or a read key below the others on average: neither criterion applies
  if (queries.empty() || !(mean_gap > 0)) return out;
  out.heads = static_cast<int64_t>(held.size());
  out.beta = beta_sum / static_cast<double>(queries.size());
  out.rho = 1 - mean_gap;
  out.gamma_c = 1 / mean_gap;

  const int64_t L = reading.seq_len, T = out.target * L;
  // beta* of each held query at each multiple; its median over the queries
  std::vector<double> star_at_target;
  for (int64_t m : reading.multiples) {
    std::vector<double> star;
    for (const ForecastQuery* q : queries) {
      const auto pool = reading.pools.find({q->layer, q->head});
      // the query's draws are those of its index in the reading, as the ISR forecast's
      const auto draws = static_cast<uint64_t>(q - reading.queries.data());
      star.push_back(gap_count_beta(row_gaps(
          *q, m, pool == reading.pools.end() ? std::vector<double>{} : pool->second, draws)));
    }
    std::vector<double> sorted = star;
    std::sort(sorted.begin(), sorted.end());
    out.beta_gap_count.push_back(sorted[sorted.size() / 2]);
    if (m == out.target) star_at_target = std::move(star);
  }

  // the held heads' multipliers under log:c relative to the trained ones
  auto ratio = [&](const std::vector<torch::Tensor>& at_rule, int64_t layer, int64_t head,
                   int64_t t_m, int64_t t) {
    return head_scale(at_rule[static_cast<size_t>(layer)], head, t_m) /
           head_scale(reading.at_train[static_cast<size_t>(layer)], head, t);
  };
  const double need = std::log(static_cast<double>(T)) * out.gamma_c;
  out.c_critical = smallest_c([&](double c) {
    const auto at_rule = rule_scales(model, BetaRule::log(c), T);
    double sum = 0;
    for (const auto& [layer, head] : held) sum += ratio(at_rule, layer, head, T - 1, L - 1);
    return out.beta * sum / static_cast<double>(held.size()) >= need;
  });
  out.c_gap_count = smallest_c([&](double c) {
    const auto at_rule = rule_scales(model, BetaRule::log(c), T);
    size_t met = 0;
    for (size_t i = 0; i < queries.size(); ++i) {
      const ForecastQuery& q = *queries[i];
      const int64_t t_m = out.target * (q.t + 1) - 1;
      if (q.beta * ratio(at_rule, q.layer, q.head, t_m, q.t) >= star_at_target[i]) ++met;
    }
    return 2 * met >= queries.size();  // the median query
  });
  return out;
}

}  // namespace recall
