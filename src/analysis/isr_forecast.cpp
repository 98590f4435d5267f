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

double head_scale(const torch::Tensor& s, int64_t h, int64_t t) {
  return s[s.size(0) == 1 ? 0 : h][t].item<double>();
}

double query_isr(const ForecastQuery& q, int64_t m, double rho, const std::vector<double>* pool,
                 uint64_t draws) {
  const int64_t t_m = m * (q.t + 1) - 1;
  double own = 0;
  for (double d : q.d) own += std::exp(2 * rho * d);
  if (pool == nullptr || pool->empty()) {
    const double grow = q.t > 0 ? static_cast<double>(t_m) / static_cast<double>(q.t) : 0.0;
    return std::sqrt(grow * own);
  }
  const int64_t n = t_m - q.t;
  double added = 0;
  for (int64_t i = 0; i < n; ++i)
    added += std::exp(2 * rho * q.beta * (pool_draw(*pool, draws, i) - q.read));
  return std::sqrt(own + added);
}

namespace {

// Adds one multiple to f: per head, the median of its queries' ISR; their mean over the heads.
// per (layer, head), the ISR of each of its queries
using HeadQueries = std::map<std::pair<int64_t, int64_t>, std::vector<double>>;

void add_multiple(IsrForecast& f, const HeadQueries& by_head) {
  double total = 0;
  for (const auto& [key, isr] : by_head) {
    const int64_t layer = key.first, head = key.second;  // a lambda may capture these (C++17)
    auto at = std::find_if(f.per_head.begin(), f.per_head.end(),
                           [&](const HeadIsr& h) { return h.layer == layer && h.head == head; });
    if (at == f.per_head.end()) at = f.per_head.insert(f.per_head.end(), {layer, head, {}});
    at->isr.push_back(summarize(isr).median);
    total += at->isr.back();
  }
  f.heads = std::max(f.heads, static_cast<int64_t>(by_head.size()));
  f.isr.push_back(by_head.empty() ? 0.0 : total / static_cast<double>(by_head.size()));
}

}  // namespace

IsrForecast forecast_from_queries(const std::vector<ForecastQuery>& queries,
                                  const std::vector<torch::Tensor>& at_train,
                                  const std::vector<torch::Tensor>& at_rule, BetaRule rule,
                                  const std::vector<int64_t>& multiples,
                                  const std::vector<int64_t>& pairs, const KeyPools& pools) {
  check_arg(pairs.size() == multiples.size(), "forecast_from_queries: a pair count per multiple");
  IsrForecast f;
  f.rule = rule;
  f.multiples = multiples;
  f.pairs = pairs;
  for (int64_t m : multiples) {
    // per head, the median over its queries; then the mean over the heads
    std::map<std::pair<int64_t, int64_t>, std::vector<double>> by_head;
    for (size_t k = 0; k < queries.size(); ++k) {
      const ForecastQuery& q = queries[k];
      const int64_t t_m = m * (q.t + 1) - 1;
      const double rho = head_scale(at_rule[static_cast<size_t>(q.layer)], q.head, t_m) /
                         head_scale(at_train[static_cast<size_t>(q.layer)], q.head, q.t);
      const auto pool = pools.find({q.layer, q.head});
      by_head[{q.layer, q.head}].push_back(
          query_isr(q, m, rho, pool == pools.end() ? nullptr : &pool->second, k));
    }
    add_multiple(f, by_head);
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

namespace {

// The recalling heads' queries on `set` as `model` runs now (its rule, or a length emulation):
// per query its logit gaps d_j (the read key left out) and position t; `at` the multipliers the
// gaps are divided by for the cosine gaps and beta (per layer (H or 1, >= T)).
struct QueryReading {
  std::vector<ForecastQuery> queries;
  KeyPools pools;
  std::vector<double> cosine_gaps;
  double beta = 0;  // the mean multiplier at the queries
};
QueryReading read_queries(Transformer& model, const std::vector<Batch>& set,
                          const std::vector<Batch>& pool_set, const std::vector<HeadReport>& heads,
                          int64_t pairs, const std::vector<torch::Tensor>& at) {
  torch::NoGradGuard no_grad;
  QueryReading r;
  double beta_sum = 0;
  std::vector<torch::Tensor> at64;  // per layer (H or 1, >= T), float64 (ssmax's scale is float32)
  for (const auto& s : at) at64.push_back(s.to(torch::kFloat64).contiguous());
  for (size_t batch = 0; batch < set.size() + pool_set.size(); ++batch) {
    const bool own = batch < set.size();  // the queries read; pool_set adds to the pools alone
    const Batch& b = own ? set[batch] : pool_set[batch - set.size()];
    const auto asked = mqar_queries(b, pairs);
    ActivationCache cache;  // the attention's tensors are what is read: no logits
    model->hidden(b.x.to(model->parameters().front().device()), &cache);
    // per layer, its cached tensors in float64 on the CPU, converted once for all its heads
    std::map<std::pair<int64_t, std::string>, torch::Tensor> read;
    const auto at_layer = [&](int64_t layer, const char* name) -> const torch::Tensor& {
      auto& t = read[{layer, name}];
      if (!t.defined())
        t = cache.at(fmt::format("blocks.{}.attn.{}", layer, name))
                .cpu()
                .to(torch::kFloat64)
                .contiguous();
      return t;
    };
    for (const HeadReport& h : heads) {
      if (!h.recalls()) continue;
      const auto& w = at_layer(h.layer, "weights");  // (B, H, T, N + T): the weights computed
      // (B, T, N + T): the scores q^ . k of this head, the logits over the multiplier and |q|.
      // The keys' projections on the query's direction are what the queries of a head share
      // (their |q| differs where q is not unit), so the pool holds those.
      const auto qh = at_layer(h.layer, "q").select(2, h.head);          // (B, T, dh)
      const auto q_norm = qh.norm(2, -1).clamp_min(1e-30).contiguous();  // (B, T)
      const auto score = torch::einsum("btd,bsd->bts", {qh / q_norm.unsqueeze(-1),
                                                        at_layer(h.layer, "k").select(2, h.head)})
                             .contiguous();
      // the queries read through raw rows: a tensor op per element read cost more than the rest
      const int64_t H = w.size(1), T = w.size(2), NT = w.size(3), N = NT - T;
      const double* weights = w.data_ptr<double>();
      const double* scores = score.data_ptr<double>();
      const double* norms = q_norm.data_ptr<double>();
      const torch::Tensor& scale = at64[static_cast<size_t>(h.layer)];
      const double* scale_row =
          scale.data_ptr<double>() + (scale.size(0) == 1 ? 0 : h.head) * scale.size(1);
      auto& pool = r.pools[{h.layer, h.head}];
      for (int64_t s = 0; s < b.x.size(0); ++s) {
        const auto& q = asked[static_cast<size_t>(s)];
        for (size_t i = 0; i < q.t.size(); ++i) {
          const int64_t t = q.t[i], c = N + q.pair[i] + h.offset;
          const double* row = weights + ((s * H + h.head) * T + t) * NT;  // the keys t sees
          const double wc = row[c];
          if (!(wc > 0)) continue;  // a read key of weight 0 says nothing of the rest
          const double* ps = scores + (s * T + t) * NT;
          if (!own) {
            for (int64_t j = N; j <= N + t; ++j)
              if (j != c && row[j] > 0) pool.push_back(ps[j]);
            continue;
          }
          const double beta = scale_row[t];
          // (N + t + 1,), d_c = 0: torch's division and log, as the forecast always read them
          const auto d =
              (torch::from_blob(const_cast<double*>(row), {N + t + 1}, torch::kFloat64) / wc).log();
          const double* p = d.data_ptr<double>();
          std::vector<double> rest;
          for (int64_t j = 0; j <= N + t; ++j)
            if (j != c && std::isfinite(p[j])) {
              rest.push_back(p[j]);
              r.cosine_gaps.push_back(-p[j] / beta);
              if (j >= N) pool.push_back(ps[j]);  // the learned memories do not multiply
            }
          beta_sum += beta;
          r.queries.push_back(
              {h.layer, h.head, t, std::move(rest), ps[c], beta * norms[s * T + t]});
        }
      }
    }
  }
  if (!r.queries.empty()) r.beta = beta_sum / static_cast<double>(r.queries.size());
  for (auto& [key, pool] : r.pools) std::sort(pool.begin(), pool.end());
  return r;
}

}  // namespace

ForecastReading read_forecast(Transformer& model, const TrainConfig& config,
                              const std::vector<int64_t>& multiples, int64_t batches) {
  if (config.task.kind != TaskKind::kMqar)
    throw UsageError("the ISR forecast reads mqar prompts; this checkpoint's task is " +
                     to_string(config.task.kind));
  check_arg(!multiples.empty() && multiples.front() == 1,
            "forecast_isr: the multiples start at 1, the training length");
  ForecastReading r;
  r.multiples = multiples;
  r.seq_len = model->config.seq_len;
  r.trained = model->config.attn_rule;
  r.pairs_1x = config.task.mqar_pairs;
  for (int64_t m : multiples) r.pairs.push_back(mqar_pairs_at(config, m, PairsAtLength::kGrow));
  auto task = make_task(config, {});
  r.prompts = length_prompts(*task, config, r.seq_len, batches, r.pairs_1x);
  {  // the pool's: the stream's next prompts, to kPoolSequences in all (the same chunks)
    const int64_t B = config.trainer.batch_size;
    auto all = length_prompts(*task, config, r.seq_len,
                              std::max(batches, (kPoolSequences + B - 1) / B), r.pairs_1x);
    r.pool_prompts.assign(all.begin() + static_cast<std::ptrdiff_t>(r.prompts.size()), all.end());
  }
  r.heads = inspect_heads(model, r.prompts, r.pairs_1x);
  r.at_train = rule_scales(model, r.trained, multiples.back() * r.seq_len);
  QueryReading q = read_queries(model, r.prompts, r.pool_prompts, r.heads, r.pairs_1x, r.at_train);
  r.queries = std::move(q.queries);
  r.pools = std::move(q.pools);
  r.beta = q.beta;
  const IsrSummary g = summarize(q.cosine_gaps);
  r.gap_median = g.median;
  r.gap_p10 = g.p10;
  return r;
}

namespace {

// Every layer under a length emulation for the scope's life; the model as it was after it.
struct Emulating {
  Transformer& model;
  Emulating(Transformer& m, const std::vector<torch::Tensor>& scale, const torch::Tensor& count,
            bool quadrature = false)
      : model(m) {
    for (size_t l = 0; l < scale.size(); ++l)
      model->block(l)->attn->set_length_emulation({scale[l], count, quadrature});
  }
  ~Emulating() {
    for (size_t l = 0; l < static_cast<size_t>(model->config.n_layers); ++l)
      model->block(l)->attn->set_length_emulation({});
  }
  Emulating(const Emulating&) = delete;
  Emulating& operator=(const Emulating&) = delete;
};

// A context m times longer at the training length T: per layer the rule's multipliers (H or 1,
// T) at t_m = m (t + 1) - 1, where each position sits in the longer prompt, and the count of every
// key but the read one, t_m / t (position 0 sees no other key).
struct LongerContext {
  std::vector<torch::Tensor> scale;
  torch::Tensor count;
};
LongerContext longer_context(const std::vector<torch::Tensor>& at_rule, int64_t T, int64_t m) {
  const auto t = torch::arange(T, torch::kInt64);  // (T,) the positions read
  const auto t_m = m * (t + 1) - 1;                // (T,)
  LongerContext c;
  c.count = (t_m.to(torch::kFloat64) / t.to(torch::kFloat64).clamp_min(1)).clamp_min(1);
  for (const auto& s : at_rule) c.scale.push_back(s.index_select(1, t_m));
  return c;
}

}  // namespace

namespace {

// Each recalling head's query ISRs at m times the training length, every layer emulating it under
// `at_rule` (rule_scales to the last multiple): what forecast_layered reads at one multiple.
HeadQueries layered_at(Transformer& model, const ForecastReading& reading,
                       const std::vector<torch::Tensor>& at_rule, int64_t m) {
  const LongerContext longer = longer_context(at_rule, reading.seq_len, m);
  // A first-layer head's scores are those of its projections of the tokens, whatever the rule and
  // length: its pool is the reading's. Only heads above read their pools again.
  const bool above = std::any_of(reading.heads.begin(), reading.heads.end(),
                                 [](const HeadReport& h) { return h.recalls() && h.layer > 0; });
  const QueryReading q = [&] {
    Emulating on(model, longer.scale, longer.count);
    return read_queries(model, reading.prompts, above ? reading.pool_prompts : std::vector<Batch>{},
                        reading.heads, reading.pairs_1x, longer.scale);
  }();
  HeadQueries by_head;
  for (size_t k = 0; k < q.queries.size(); ++k) {  // d_j and beta at the rule's multiplier
    const ForecastQuery& fq = q.queries[k];
    const KeyPools& pools = fq.layer == 0 ? reading.pools : q.pools;
    by_head[{fq.layer, fq.head}].push_back(
        query_isr(fq, m, 1.0, &pools.at({fq.layer, fq.head}), k));
  }
  return by_head;
}

}  // namespace

IsrForecast forecast_layered(Transformer& model, const ForecastReading& reading, BetaRule rule) {
  const auto at_rule = rule_scales(model, rule, reading.multiples.back() * reading.seq_len);
  IsrForecast f;
  f.rule = rule;
  f.multiples = reading.multiples;
  f.pairs = reading.pairs;
  for (int64_t m : reading.multiples) add_multiple(f, layered_at(model, reading, at_rule, m));
  if (f.heads > 0) f.overflow_pairs = crossing(f.pairs, f.isr);
  f.beta = reading.beta;
  f.gap_median = reading.gap_median;
  f.gap_p10 = reading.gap_p10;
  return f;
}

bool forecast_layered_holds(Transformer& model, const ForecastReading& reading, BetaRule rule,
                            const std::set<std::pair<int64_t, int64_t>>& held, double level) {
  const auto at_rule = rule_scales(model, rule, reading.multiples.back() * reading.seq_len);
  for (auto m = reading.multiples.rbegin(); m != reading.multiples.rend(); ++m) {
    // the mean over the held heads of each one's median, in held_heads' order (by layer, head)
    double total = 0;
    int64_t heads = 0;
    for (const auto& [key, isr] : layered_at(model, reading, at_rule, *m))
      if (held.count(key)) {
        total += summarize(isr).median;
        ++heads;
      }
    if (heads > 0 && total / static_cast<double>(heads) > level) return false;
  }
  return true;
}

IsrForecast forecast_under(Transformer& model, const ForecastReading& reading, BetaRule rule) {
  IsrForecast f =
      forecast_from_queries(reading.queries, reading.at_train,
                            rule_scales(model, rule, reading.multiples.back() * reading.seq_len),
                            rule, reading.multiples, reading.pairs, reading.pools);
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
  for (BetaRule rule : rules) out.push_back(forecast_layered(model, reading, rule));
  return out;
}

namespace {

// The share of the scored answers the model gets right on the prompts read, every layer emulating
// m times the training length under `at_rule` (rule_scales to the last multiple). Only the scored
// rows reach the head: (scored, vocab) logits, not (B, T, vocab).
double accuracy_at(Transformer& model, const ForecastReading& reading,
                   const std::vector<torch::Tensor>& at_rule, int64_t m) {
  torch::NoGradGuard no_grad;
  const auto device = model->parameters().front().device();
  const LongerContext longer = longer_context(at_rule, reading.seq_len, m);
  Emulating on(model, longer.scale, longer.count, /*quadrature=*/true);
  double right = 0, scored = 0;
  for (const Batch& b : reading.prompts) {
    const auto mask = b.mask.to(torch::kBool);                                         // (B, T)
    const auto guess = model->forward_at(b.x.to(device), mask.to(device)).argmax(-1);  // (scored,)
    right += (guess.cpu() == b.y.index({mask})).sum().item<double>();
    scored += static_cast<double>(guess.size(0));
  }
  return scored > 0 ? right / scored : 0.0;
}

}  // namespace

std::vector<double> forecast_accuracy(Transformer& model, const ForecastReading& reading,
                                      BetaRule rule) {
  const auto at_rule = rule_scales(model, rule, reading.multiples.back() * reading.seq_len);
  std::vector<double> out;
  for (int64_t m : reading.multiples) out.push_back(accuracy_at(model, reading, at_rule, m));
  return out;
}

bool forecast_accuracy_holds(Transformer& model, const ForecastReading& reading, BetaRule rule,
                             double level) {
  const auto at_rule = rule_scales(model, rule, reading.multiples.back() * reading.seq_len);
  for (auto m = reading.multiples.rbegin(); m != reading.multiples.rend(); ++m)
    if (accuracy_at(model, reading, at_rule, *m) < level) return false;
  return true;
}

IsrForecast held_heads(const IsrForecast& f) {
  IsrForecast out = f;
  out.per_head.clear();
  for (const HeadIsr& h : f.per_head)
    if (!h.isr.empty() && h.isr.front() < 1) out.per_head.push_back(h);
  out.heads = static_cast<int64_t>(out.per_head.size());
  for (size_t i = 0; i < out.isr.size(); ++i) {
    double sum = 0;
    for (const HeadIsr& h : out.per_head) sum += h.isr[i];
    out.isr[i] = out.heads > 0 ? sum / static_cast<double>(out.heads) : 0.0;
  }
  out.overflow_pairs = out.heads > 0 ? crossing(out.pairs, out.isr) : std::nullopt;
  return out;
}

Prescription prescribe(const std::function<IsrForecast(BetaRule)>& forecast, double level,
                       const HeldBelow& below) {
  check_arg(std::isfinite(level) && level > 0,
            fmt::format("the ISR level {}: must be a number > 0", level));
  Prescription p;
  p.level = level;
  auto under = [&](double c) { return held_heads(forecast(BetaRule::log(c))); };
  auto holds = [&](const IsrForecast& f) {
    return std::all_of(f.isr.begin(), f.isr.end(), [&](double isr) { return isr <= level; });
  };
  const IsrForecast all = forecast(BetaRule::log(0));
  if (all.heads == 0) {
    p.why_none = "no head recalls at the training length";
    return p;
  }
  IsrForecast f = held_heads(all);
  p.left_out = all.heads - f.heads;
  for (const HeadIsr& h : f.per_head) p.held.insert({h.layer, h.head});
  if (f.heads == 0) {
    p.why_none = "no recalling head holds its memories at the training length (ISR < 1)";
    return p;
  }
  if (f.isr.front() > level) {  // log:c is rule none up to the training length
    p.why_none = fmt::format("the ISR at the training length, {:.3g}, is above {:.3g} already",
                             f.isr.front(), level);
    return p;
  }
  // The ISR need not fall monotonically in c: a key above the read one grows with it.
  // log:c is rule none up to the training length, so the heads held at 1x are those of c = 0
  const auto holds_at = [&](double c) {
    return below ? below(BetaRule::log(c), p.held, level) : holds(under(c));
  };
  const auto c = smallest_c(holds_at);
  if (!c) {
    p.why_none = fmt::format("no c up to 1,000 holds the forecast ISR at or below {:.3g}", level);
    return p;
  }
  p.c = c;
  p.forecast = under(*p.c);
  return p;
}

namespace {

// v rounded up to three significant digits: a c a user can type. Divided by an exact power of ten,
// so that 915 / 1e6 prints as 0.000915.
double three_digits_up(double v) {
  const int k = 2 - static_cast<int>(std::floor(std::log10(v)));
  const double scale = std::pow(10.0, std::abs(k));
  return k >= 0 ? std::ceil(v * scale - 1e-9) / scale : std::ceil(v / scale - 1e-9) * scale;
}

// The three-digit values in (lo, hi], ascending; hi is one of them.
std::vector<double> three_digit_values(double lo, double hi) {
  std::vector<double> out;
  for (double v = three_digits_up(std::max(lo, hi / 10)); v < hi;) {
    if (v > lo) out.push_back(v);
    // the next three-digit value: one unit of the third digit up
    const int k = 2 - static_cast<int>(std::floor(std::log10(v)));
    const double step = std::pow(10.0, -k);
    v = three_digits_up(v + 0.5 * step);
  }
  out.push_back(hi);
  return out;
}

}  // namespace

std::optional<double> smallest_c(const std::function<bool(double)>& holds) {
  if (holds(0)) return 0.0;
  double lo = 0, hi = -1;
  for (double c = 1e-3;; c = std::min(c * 1.25, 1e3)) {
    if (holds(c)) {
      hi = c;
      break;
    }
    lo = c;
    if (c >= 1e3) return std::nullopt;
  }
  // bisection over the three-digit values between the scan's last two steps: at most 9 reads
  // (10 where the first step, 1e-3, holds and the values run down to 1e-4)
  const double up = three_digits_up(hi);
  if (up != hi && !holds(up)) return hi;  // holds need not be monotone: keep the scan's c
  const std::vector<double> values = three_digit_values(lo, up);
  int64_t fails = -1, passes = static_cast<int64_t>(values.size()) - 1;  // indices into values
  while (passes - fails > 1) {
    const int64_t mid = (fails + passes) / 2;
    (holds(values[static_cast<size_t>(mid)]) ? passes : fails) = mid;
  }
  return values[static_cast<size_t>(passes)];
}

AccuracyPrescription prescribe_accuracy(Transformer& model, const ForecastReading& reading,
                                        double level) {
  check_arg(std::isfinite(level) && level > 0 && level < 1,
            fmt::format("the accuracy level {}: must be a number in (0, 1)", level));
  AccuracyPrescription p;
  p.level = level;
  const double at_1x =
      accuracy_at(model, reading, rule_scales(model, BetaRule::log(0), reading.seq_len), 1);
  if (at_1x < level) {  // log:c is rule none up to the training length
    p.why_none = fmt::format("the accuracy at the training length, {:.3g}, is below {:.3g} already",
                             at_1x, level);
    return p;
  }
  const auto holds_at = [&](double c) {
    return forecast_accuracy_holds(model, reading, BetaRule::log(c), level);
  };
  p.c = smallest_c(holds_at);
  if (!p.c) {
    p.why_none =
        fmt::format("no c up to 1,000 holds the forecast accuracy at or above {:.3g}", level);
    return p;
  }
  p.accuracy = forecast_accuracy(model, reading, BetaRule::log(*p.c));
  return p;
}

}  // namespace recall
