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

std::vector<IsrForecast> forecast_isr(Transformer& model, const TrainConfig& config,
                                      const std::vector<int64_t>& multiples,
                                      const std::vector<BetaRule>& rules, int64_t batches) {
  if (config.task.kind != TaskKind::kMqar)
    throw UsageError("the ISR forecast reads mqar prompts; this checkpoint's task is " +
                     to_string(config.task.kind));
  check_arg(!multiples.empty() && multiples.front() == 1,
            "forecast_isr: the multiples start at 1, the training length");
  torch::NoGradGuard no_grad;
  const ModelConfig& mc = model->config;
  const int64_t L = mc.seq_len, T_max = multiples.back() * L, pairs = config.task.mqar_pairs;
  const BetaRule trained = mc.attn_rule;
  auto task = make_task(config, {});
  const auto set = length_prompts(*task, config, L, batches, pairs);
  const auto heads = inspect_heads(model, set, pairs);
  // the multiplier of each head at every position, under the trained rule and each other rule
  auto scales = [&](BetaRule rule) {
    model->set_attn_rule(rule);
    std::vector<torch::Tensor> out;  // per layer (H or 1, T_max), float64
    for (int64_t l = 0; l < model->config.n_layers; ++l)
      out.push_back(model->block(l)->attn->logit_scale(T_max, torch::kFloat64));
    model->set_attn_rule(trained);
    return out;
  };
  const auto at_train = scales(trained);
  // per recalling head, per query: its logit gaps d_j (the read key left out) and position t
  std::vector<ForecastQuery> queries;
  std::vector<double> gaps, betas;
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
          const double beta = head_scale(at_train[static_cast<size_t>(h.layer)], h.head, t);
          auto d = (row / wc).log();  // (N + t + 1,), d_c = 0
          std::vector<double> rest;
          const double* p = d.data_ptr<double>();
          for (int64_t j = 0; j <= N + t; ++j)
            if (j != c && std::isfinite(p[j])) {
              rest.push_back(p[j]);
              gaps.push_back(-p[j] / beta);
            }
          betas.push_back(beta);
          queries.push_back({h.layer, h.head, t, std::move(rest)});
        }
      }
    }
  }
  std::vector<int64_t> pairs_at;
  for (int64_t m : multiples) pairs_at.push_back(mqar_pairs_at(config, m, PairsAtLength::kGrow));
  double beta_sum = 0;
  for (double b : betas) beta_sum += b;
  const IsrSummary g = summarize(gaps);
  std::vector<IsrForecast> out;
  for (BetaRule rule : rules) {
    IsrForecast f =
        forecast_from_queries(queries, at_train, scales(rule), rule, multiples, pairs_at);
    f.beta = betas.empty() ? 0.0 : beta_sum / static_cast<double>(betas.size());
    f.gap_median = g.median;
    f.gap_p10 = g.p10;
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace recall
