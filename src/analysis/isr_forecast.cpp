#include "recall/analysis/isr_forecast.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "recall/analysis/inspect_heads.h"
#include "recall/core/error.h"
#include "recall/models/activation_cache.h"
#include "recall/models/block.h"

namespace recall {
namespace {

// Head h's multiplier at position t, from logit_scale's (H or 1, T).
double head_scale(const torch::Tensor& s, int64_t h, int64_t t) {
  return s[s.size(0) == 1 ? 0 : h][t].item<double>();
}

}  // namespace

IsrForecast forecast_from_queries(const std::vector<ForecastQuery>& queries,
                                  const std::vector<torch::Tensor>& at_train,
                                  const std::vector<torch::Tensor>& at_rule, BetaRule rule,
                                  const std::vector<int64_t>& multiples,
                                  const std::vector<int64_t>& pairs) {
  check_arg(pairs.size() == multiples.size(), "forecast_from_queries: a pair count per multiple");
  IsrForecast f;
  f.rule = rule;
  f.multiples = multiples;
  f.pairs = pairs;
  for (int64_t m : multiples) {
    // per head, the median over its queries; then the mean over the heads
    std::map<std::pair<int64_t, int64_t>, std::vector<double>> by_head;
    for (const ForecastQuery& q : queries) {
      const int64_t t_m = m * (q.t + 1) - 1;
      const double rho = head_scale(at_rule[static_cast<size_t>(q.layer)], q.head, t_m) /
                         head_scale(at_train[static_cast<size_t>(q.layer)], q.head, q.t);
      double sum = 0;
      for (double d : q.d) sum += std::exp(2 * rho * d);
      const double grow = q.t > 0 ? static_cast<double>(t_m) / static_cast<double>(q.t) : 0.0;
      by_head[{q.layer, q.head}].push_back(std::sqrt(grow * sum));
    }
    double total = 0;
    for (auto& [key, isr] : by_head) total += summarize(isr).median;
    f.heads = static_cast<int64_t>(by_head.size());
    f.isr.push_back(by_head.empty() ? 0.0 : total / static_cast<double>(by_head.size()));
  }
  if (f.heads > 0) f.overflow_pairs = crossing(f.pairs, f.isr);
  return f;
}

std::vector<torch::Tensor> rule_scales(Transformer& model, BetaRule rule, int64_t T) {
  const BetaRule own = model->config.attn_rule;
  model->set_attn_rule(rule);
  std::vector<torch::Tensor> out;  // per layer (H or 1, T), float64
  for (int64_t l = 0; l < model->config.n_layers; ++l)
    out.push_back(model->block(l)->attn->logit_scale(T, torch::kFloat64));
  model->set_attn_rule(own);
  return out;
}

ForecastReading read_forecast(Transformer& model, const TrainConfig& config,
                              const std::vector<int64_t>& multiples, int64_t batches) {
  if (config.task.kind != TaskKind::kMqar)
    throw UsageError("the ISR forecast reads mqar prompts; this checkpoint's task is " +
                     to_string(config.task.kind));
  check_arg(!multiples.empty() && multiples.front() == 1,
            "forecast_isr: the multiples start at 1, the training length");
  torch::NoGradGuard no_grad;
  ForecastReading r;
  r.multiples = multiples;
  r.seq_len = model->config.seq_len;
  r.trained = model->config.attn_rule;
  const int64_t pairs = config.task.mqar_pairs;
  for (int64_t m : multiples) r.pairs.push_back(mqar_pairs_at(config, m, PairsAtLength::kGrow));
  auto task = make_task(config, {});
  const auto set = length_prompts(*task, config, r.seq_len, batches, pairs);
  const auto heads = inspect_heads(model, set, pairs);
  r.at_train = rule_scales(model, r.trained, multiples.back() * r.seq_len);
  // per recalling head, per query: its logit gaps d_j (the read key left out) and position t
  std::vector<double> gaps;
  double beta_sum = 0;
  for (const Batch& b : set) {
    const auto asked = mqar_queries(b, pairs);
    ActivationCache cache;
    model->forward(b.x.to(model->parameters().front().device()), &cache);
    for (const HeadReport& h : heads) {
      if (!h.recalls()) continue;
      // (B, H, T, N + T): the weights the model computed, in float64
      const auto w =
          cache.at(fmt::format("blocks.{}.attn.weights", h.layer)).cpu().to(torch::kFloat64);
      const int64_t N = w.size(3) - w.size(2);
      for (int64_t s = 0; s < b.x.size(0); ++s) {
        const auto& q = asked[static_cast<size_t>(s)];
        for (size_t i = 0; i < q.t.size(); ++i) {
          const int64_t t = q.t[i], c = N + q.pair[i] + h.offset;
          const auto row = w[s][h.head][t].narrow(0, 0, N + t + 1);  // the keys t sees
          const double wc = row[c].item<double>();
          if (!(wc > 0)) continue;  // a read key of weight 0 says nothing of the rest
          const double beta = head_scale(r.at_train[static_cast<size_t>(h.layer)], h.head, t);
          auto d = (row / wc).log();  // (N + t + 1,), d_c = 0
          std::vector<double> rest;
          const double* p = d.data_ptr<double>();
          for (int64_t j = 0; j <= N + t; ++j)
            if (j != c && std::isfinite(p[j])) {
              rest.push_back(p[j]);
              gaps.push_back(-p[j] / beta);
            }
          beta_sum += beta;
          r.queries.push_back({h.layer, h.head, t, std::move(rest)});
        }
      }
    }
  }
  if (!r.queries.empty()) r.beta = beta_sum / static_cast<double>(r.queries.size());
  const IsrSummary g = summarize(gaps);
  r.gap_median = g.median;
  r.gap_p10 = g.p10;
  return r;
}

IsrForecast forecast_under(Transformer& model, const ForecastReading& reading, BetaRule rule) {
  IsrForecast f =
      forecast_from_queries(reading.queries, reading.at_train,
                            rule_scales(model, rule, reading.multiples.back() * reading.seq_len),
                            rule, reading.multiples, reading.pairs);
  f.beta = reading.beta;
  f.gap_median = reading.gap_median;
  f.gap_p10 = reading.gap_p10;
  return f;
}

std::vector<IsrForecast> forecast_isr(Transformer& model, const TrainConfig& config,
                                      const std::vector<int64_t>& multiples,
                                      const std::vector<BetaRule>& rules, int64_t batches) {
  const ForecastReading reading = read_forecast(model, config, multiples, batches);
  std::vector<IsrForecast> out;
  for (BetaRule rule : rules) out.push_back(forecast_under(model, reading, rule));
  return out;
}

Prescription prescribe(const std::vector<ForecastQuery>& queries,
                       const std::vector<torch::Tensor>& at_train,
                       const std::function<std::vector<torch::Tensor>(BetaRule)>& scales,
                       const std::vector<int64_t>& multiples, const std::vector<int64_t>& pairs,
                       double level) {
  check_arg(std::isfinite(level) && level > 0,
            fmt::format("the ISR level {}: must be a number > 0", level));
  Prescription p;
  p.level = level;
  auto under = [&](double c) {
    const BetaRule rule = BetaRule::log(c);
    return forecast_from_queries(queries, at_train, scales(rule), rule, multiples, pairs);
  };
  auto holds = [&](const IsrForecast& f) {
    return std::all_of(f.isr.begin(), f.isr.end(), [&](double isr) { return isr <= level; });
  };
  if (queries.empty()) {
    p.why_none = "no head recalls at the training length";
    return p;
  }
  IsrForecast f = under(0);
  if (f.isr.front() > level) {  // log:c is rule none up to the training length
    p.why_none = fmt::format("the ISR at the training length, {:.3g}, is above {:.3g} already",
                             f.isr.front(), level);
    return p;
  }
  // The ISR need not fall monotonically in c (a key above the read one grows with it): the first
  // c of a geometric scan that holds, then bisection between it and the scan's step before.
  double lo = 0, hi = -1;
  if (holds(f)) {
    hi = 0;
  } else {
    for (double c = 1e-3; c <= 1e3; c *= 1.25) {
      if (holds(under(c))) {
        hi = c;
        break;
      }
      lo = c;
    }
  }
  if (hi < 0) {
    p.why_none = fmt::format("no c up to 1,000 holds the forecast ISR at or below {:.3g}", level);
    return p;
  }
  while (hi > 0 && hi - lo > 1e-4 * hi) {
    const double mid = 0.5 * (lo + hi);
    (holds(under(mid)) ? hi : lo) = mid;
  }
  // three significant digits, rounded up, where they still hold: a rule a user can type
  if (hi > 0) {
    // divided by an exact power of ten, so that 915 / 1e6 prints as 0.000915
    const int k = 2 - static_cast<int>(std::floor(std::log10(hi)));
    const double scale = std::pow(10.0, std::abs(k));
    const double up = k >= 0 ? std::ceil(hi * scale - 1e-9) / scale : std::ceil(hi / scale) * scale;
    if (holds(under(up))) hi = up;
  }
  p.c = hi;
  p.forecast = under(hi);
  return p;
}

}  // namespace recall
