#include "recall/analysis/forecast_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "recall/core/error.h"

namespace recall {

void ForecastConfig::validate() const {
  check_arg(target >= 2 && target <= 4096,
            fmt::format("--target {}x: must be a multiple from 2 to 4096 of the training length",
                        target));
  check_arg(std::isfinite(level) && level > 0,
            fmt::format("--isr {}: must be a number > 0 (1 is the overflow)", level));
  check_arg(std::isfinite(accuracy) && accuracy > 0 && accuracy < 1,
            fmt::format("--accuracy {}: must be a number in (0, 1), e.g. 0.96", accuracy));
  check_arg(batches >= 1 && batches <= 1000,
            fmt::format("--batches {}: must be from 1 to 1000", batches));
}

std::vector<int64_t> forecast_multiples(int64_t target) {
  std::vector<int64_t> out;
  for (int64_t m = 1; m < target; m *= 2) out.push_back(m);
  out.push_back(target);
  return out;
}

ForecastReport forecast_checkpoint(Restored& restored, const ForecastConfig& config,
                                   const std::string& checkpoint) {
  config.validate();
  Transformer& model = restored.model;
  ForecastReport report;
  report.checkpoint = checkpoint;
  report.seq_len = model->config.seq_len;
  report.target = config.target;
  report.trained = model->config.attn_rule;
  std::vector<BetaRule> rules = config.rules;
  if (std::find(rules.begin(), rules.end(), report.trained) == rules.end())
    rules.insert(rules.begin(), report.trained);
  const ForecastReading reading =
      read_forecast(model, restored.config, forecast_multiples(config.target), config.batches);
  for (BetaRule rule : rules) {
    report.forecasts.push_back(forecast_layered(model, reading, rule));
    report.alone.push_back(forecast_under(model, reading, rule));
    report.accuracy.push_back(forecast_accuracy(model, reading, rule));
  }
  report.prescription =
      prescribe([&](BetaRule r) { return forecast_layered(model, reading, r); }, config.level,
                [&](BetaRule r, const auto& held, double level) {
                  return forecast_layered_holds(model, reading, r, held, level);
                });
  report.by_accuracy = prescribe_accuracy(model, reading, config.accuracy);
  report.critical = critical_scaling(model, reading, report.prescription.held);
  return report;
}

namespace {

std::string isr_row(const std::string& name, const IsrForecast& f, size_t width) {
  std::string out = fmt::format("{:<{}}", name, width);
  for (double isr : f.isr) out += fmt::format(" {:>8.3f}", isr);
  out +=
      f.overflow_pairs ? fmt::format(" {:>10.0f}", *f.overflow_pairs) : fmt::format(" {:>10}", "-");
  return out + "\n";
}

// c ln L: log:c's growth as a multiple of qwen's (and su's past L), which is log:(1 / ln L)
double qwen_scale(double c, int64_t L) {
  return c * std::log(static_cast<double>(L));
}

}  // namespace

std::string forecast_table(const ForecastReport& r) {
  const IsrForecast& any = r.forecasts.front();
  std::string out = fmt::format(
      "forecast ISR of {} recalling heads (beta {:.3g} at the training length, cosine gap median "
      "{:.3g}, 10th percentile {:.3g}), read at {} tokens; memories growing with the length\n",
      any.heads, any.beta, any.gap_median, any.gap_p10, r.seq_len);
  size_t width = 14;  // the rule column: room for a prescribed log:c
  if (r.prescription.c) width = std::max(width, to_string(r.prescription.forecast.rule).size() + 2);
  out += fmt::format("{:<{}}", "rule", width);
  for (size_t i = 0; i < any.multiples.size(); ++i)
    out += fmt::format(" {:>8}", fmt::format("{}x", any.multiples[i]));
  out += fmt::format(" {:>10}\n{:<{}}", "ISR 1 at", "memories", width);
  for (int64_t p : any.pairs) out += fmt::format(" {:>8}", p);
  out += fmt::format(" {:>10}\n", "memories");
  for (const IsrForecast& f : r.forecasts)
    out += isr_row(to_string(f.rule) + (f.rule == r.trained ? " *" : ""), f, width);
  const Prescription& p = r.prescription;
  if (p.c) {
    out += isr_row(to_string(p.forecast.rule), p.forecast, width);
    out += fmt::format(
        "* trained. prescribed: {} (beta(n) = beta_0 (1 + {:.4g} ln(n / {}))) holds the forecast "
        "ISR <= {:.3g} to {}x, {} memories; {:.3g} times qwen's growth{}\n",
        to_string(p.forecast.rule), *p.c, r.seq_len, p.level, r.target, any.pairs.back(),
        qwen_scale(*p.c, r.seq_len),
        p.left_out > 0 ? fmt::format(" (its row: the {} heads with ISR < 1 at 1x; {} past it "
                                     "left out)",
                                     p.forecast.heads, p.left_out)
                       : "");
  } else {
    out += fmt::format("* trained. prescribed: none, {}\n", p.why_none);
  }
  // The model's own answers, every layer emulating the longer context (forecast_accuracy).
  out += fmt::format(
      "\nforecast accuracy (the model's answers, every layer emulating the longer "
      "context)\n{:<{}}",
      "rule", width);
  for (int64_t m : any.multiples) out += fmt::format(" {:>8}", fmt::format("{}x", m));
  out += "\n";
  auto accuracy_row = [&](const std::string& name, const std::vector<double>& a) {
    out += fmt::format("{:<{}}", name, width);
    for (double x : a) out += fmt::format(" {:>8.3f}", x);
    out += "\n";
  };
  for (size_t i = 0; i < r.forecasts.size(); ++i)
    accuracy_row(to_string(r.forecasts[i].rule) + (r.forecasts[i].rule == r.trained ? " *" : ""),
                 r.accuracy[i]);
  const AccuracyPrescription& a = r.by_accuracy;
  if (a.c) {
    accuracy_row(to_string(BetaRule::log(*a.c)), a.accuracy);
    out += fmt::format(
        "prescribed on accuracy: {} holds the forecast accuracy >= {:.3g} to {}x; {:.3g} times "
        "qwen's growth\n",
        to_string(BetaRule::log(*a.c)), a.level, r.target, qwen_scale(*a.c, r.seq_len));
  } else {
    out += fmt::format("prescribed on accuracy: none, {}\n", a.why_none);
  }
  const CriticalScaling& k = r.critical;
  if (k.heads > 0) {
    auto c = [](const std::optional<double>& v) {
      return v ? fmt::format("log:{:.3g}", *v) : std::string("none up to c = 1,000");
    };
    out += fmt::format(
        "the published criteria on the same {} heads, for {}x: critical scaling (Chen et al.), "
        "token correlation {:.3g}, beta >= {:.3g} ln n: {}; gap counting (Hayase and Karakida), "
        "the median row's beta* {:.3g} at 1x and {:.3g} at {}x: {}\n",
        k.heads, k.target, k.rho, k.gamma_c, c(k.c_critical), k.beta_gap_count.front(),
        k.beta_gap_count.back(), k.target, c(k.c_gap_count));
  }
  return out;
}

namespace {

nlohmann::json heads_json(const IsrForecast& f) {
  nlohmann::json out = nlohmann::json::array();
  for (const HeadIsr& h : f.per_head)
    out.push_back({{"layer", h.layer}, {"head", h.head}, {"isr", h.isr}});
  return out;
}

}  // namespace

std::string forecast_json(const ForecastReport& r) {
  auto optional = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  const IsrForecast& any = r.forecasts.front();
  nlohmann::json rules = nlohmann::json::array();
  for (size_t i = 0; i < r.forecasts.size(); ++i) {
    const IsrForecast& f = r.forecasts[i];
    rules.push_back({{"rule", to_string(f.rule)},
                     {"isr", f.isr},
                     {"isr_1_at_pairs", optional(f.overflow_pairs)},
                     {"accuracy", r.accuracy[i]},
                     {"isr_layers_below_at_1x", r.alone[i].isr},
                     {"heads", heads_json(f)}});
  }
  const Prescription& p = r.prescription;
  nlohmann::json prescription = {
      {"level", p.level}, {"c", optional(p.c)}, {"heads_left_out", p.left_out}};
  if (p.c) {
    prescription["rule"] = to_string(p.forecast.rule);
    prescription["qwen_scale"] = qwen_scale(*p.c, r.seq_len);
    prescription["isr"] = p.forecast.isr;
  } else {
    prescription["why_none"] = p.why_none;
  }
  const AccuracyPrescription& a = r.by_accuracy;
  nlohmann::json by_accuracy = {{"level", a.level}, {"c", optional(a.c)}};
  if (a.c) {
    by_accuracy["rule"] = to_string(BetaRule::log(*a.c));
    by_accuracy["qwen_scale"] = qwen_scale(*a.c, r.seq_len);
    by_accuracy["accuracy"] = a.accuracy;
  } else {
    by_accuracy["why_none"] = a.why_none;
  }
  const CriticalScaling& k = r.critical;
  // infinity is not JSON: a median row that no beta concentrates is null
  nlohmann::json star = nlohmann::json::array();
  for (double b : k.beta_gap_count) star.push_back(std::isfinite(b) ? nlohmann::json(b) : nullptr);
  const nlohmann::json critical = {{"heads", k.heads},
                                   {"beta", k.beta},
                                   {"rho", k.rho},
                                   {"gamma_c", k.gamma_c},
                                   {"c_critical", optional(k.c_critical)},
                                   {"beta_gap_count", star},
                                   {"c_gap_count", optional(k.c_gap_count)}};
  return nlohmann::json{{"checkpoint", r.checkpoint},
                        {"seq_len", r.seq_len},
                        {"trained_rule", to_string(r.trained)},
                        {"target", r.target},
                        {"heads", any.heads},
                        {"beta", any.beta},
                        {"gap_median", any.gap_median},
                        {"gap_p10", any.gap_p10},
                        {"multiples", any.multiples},
                        {"pairs", any.pairs},
                        {"forecasts", rules},
                        {"prescription", prescription},
                        {"prescription_by_accuracy", by_accuracy},
                        {"published_criteria", critical}}
             .dump(2) +
         "\n";
}

}  // namespace recall
