// Report section 11's files: extrapolation.json, extrapolation.png and the section (accuracy and
// the recalling heads' ISR per variant and rule, beside the probe's softmax store), followed by the
// store part's (experiment_extrapolation_store_output.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "experiment_extrapolation.h"
#include "recall/formats/plot.h"

namespace recall::experiment_detail {

using nlohmann::json;

namespace {

// extrapolation.json's points: each run of each variant at each length and rule read.
json points_json(const std::vector<ExtrapolationPoint>& points, const std::string& out_dir) {
  json out = json::array();
  for (const auto& p : points)
    out.push_back({{"variant", p.variant},
                   {"checkpoint", fs::relative(p.checkpoint, out_dir).string()},
                   {"trained_rule", to_string(p.trained)},
                   {"rule", to_string(p.rule)},
                   {"M", p.M},
                   {"pairs", p.pairs},
                   {"accuracy", p.accuracy},
                   {"recalling_heads", p.recalling_heads},
                   {"isr_median", json_or_null(p.isr_median)}});
  return out;
}

// The probe's curves as extrapolation.json holds them: per rule, its ISR at each M and beta.
json probe_curves(const ProbeReference& probe) {
  json curves = json::array();
  for (const auto& rr : probe.result.rules) {
    json pts = json::array();
    for (const auto& p : rr.curve)
      pts.push_back({{"M", p.M}, {"beta", p.beta}, {"isr_median", p.isr.median}});
    curves.push_back({{"rule", to_string(rr.rule)}, {"curve", pts}});
  }
  return curves;
}

// Per curve: the fitted exponent, the accuracy per multiple and the runs meeting the targets, as
// JSON, as table rows and as the plot's data blocks (the curves', then the probe's).
struct Reduced {
  json fits = json::array();
  std::vector<std::vector<std::string>> rows, accuracy_rows;
  std::string data;
  std::optional<std::pair<double, BetaRule>> best;  // lowest exponent of a log-M rule, pairs grow
  std::optional<double> fixed_none;                 // the exponent under none, pairs fixed
};

Reduced reduce(const std::vector<ExtrapolationCurve>& curves, const ProbeReference& probe,
               const std::vector<int64_t>& lengths) {
  // fit ISR = c (M - 1)^b per curve (the essay: ISR^2 = (M - 1) E[w^2] / w(1)^2, so b = 1/2 at a
  // fixed beta, less when beta grows with M)
  Reduced out;
  std::ostringstream data;
  // the essay's test on the trained heads: the log-M rule whose exponent is lowest, pairs growing
  for (const auto& c : curves) {
    std::optional<double> b, lnc;
    if (c.M.size() >= 2) {
      std::vector<double> x, y;
      for (size_t i = 0; i < c.M.size(); ++i)
        x.push_back(std::log(c.M[i] - 1)), y.push_back(std::log(c.isr[i]));
      b = fitted_slope(x, y);
      lnc = mean(y) - *b * mean(x);
    }
    if (b && c.variant == "grow" && c.rule != BetaRule::kNone &&
        (!out.best || *b < out.best->first))
      out.best = std::pair{*b, c.rule};
    if (b && c.variant == "fixed" && c.rule == BetaRule::kNone) out.fixed_none = *b;
    json probe_b = nullptr;
    std::string probe_b_text = "—";
    if (const auto it = probe.slope.find(c.rule); it != probe.slope.end()) {
      probe_b = it->second;
      probe_b_text = fmt::format("{:.3f}", it->second);
    }
    // the targets at long context: >= 0.95 at 16x and >= 0.9 at 64x, counted per run
    auto meeting = [&](int64_t multiple, double target) -> std::optional<int64_t> {
      const auto it = c.accuracy_at.find(multiple);
      if (it == c.accuracy_at.end()) return std::nullopt;
      return std::count_if(it->second.begin(), it->second.end(),
                           [&](double a) { return a >= target; });
    };
    const auto at16 = meeting(16, 0.95), at64 = meeting(64, 0.9);
    json accuracy = json::object();
    std::vector<std::string> acc_row{c.variant, "`" + to_string(c.trained) + "`",
                                     "`" + to_string(c.rule) + "`", std::to_string(c.runs)};
    for (int64_t m : lengths) {
      const auto it = c.accuracy_at.find(m);
      if (it == c.accuracy_at.end()) {
        acc_row.push_back("—");
        continue;
      }
      const auto& a = it->second;
      accuracy[std::to_string(m)] = a;
      acc_row.push_back(mean_range(a, "{:.3f}", "{:.2f}"));
    }
    acc_row.push_back(at16 ? fmt::format("{} of {}", *at16, c.runs) : "—");
    acc_row.push_back(at64 ? fmt::format("{} of {}", *at64, c.runs) : "—");
    out.accuracy_rows.push_back(acc_row);
    out.fits.push_back({{"variant", c.variant},
                        {"trained_rule", to_string(c.trained)},
                        {"rule", to_string(c.rule)},
                        {"runs", c.runs},
                        {"accuracy_by_multiple", accuracy},
                        {"runs_at_16x_ge_0.95", json_or_null(at16)},
                        {"runs_at_64x_ge_0.9", json_or_null(at64)},
                        {"form", "ISR = c (M - 1)^b"},
                        {"b", json_or_null(b)},
                        {"c", lnc ? json(std::exp(*lnc)) : json(nullptr)},
                        {"probe_b", probe_b}});
    std::string isr_cells;
    for (size_t i = 0; i < c.M.size(); ++i)
      isr_cells += fmt::format("{}{:.0f}: {:.3g}", i ? ", " : "", c.M[i], c.isr[i]);
    out.rows.push_back({c.variant, "`" + to_string(c.trained) + "`", "`" + to_string(c.rule) + "`",
                        std::to_string(c.runs), isr_cells.empty() ? "no recalling head" : isr_cells,
                        opt_num(b, "{:.3f}"), probe_b_text});
    for (size_t i = 0; i < c.M.size(); ++i) data << c.M[i] << ' ' << c.isr[i] << '\n';
    data << "\n\n";
  }
  for (const auto& rr : probe.result.rules) {
    for (const auto& p : rr.curve) data << p.M << ' ' << p.isr.median << '\n';
    data << "\n\n";
  }
  out.data = data.str();
  return out;
}

void plot(const std::string& path, const Reduced& reduced,
          const std::vector<ExtrapolationCurve>& curves, const ProbeReference& probe) {
  const size_t n_curves = curves.size();
  const auto dash = [](const std::string& v) {
    return v == "grow" ? "dt 1" : v == "fixed" ? "dt 2" : "dt 3";
  };
  render_plot(
      path, reduced.data,
      [&](const std::string& f) {
        std::string gp =
            "set multiplot layout 1,2\nset grid\nset logscale xy 2\nset xlabel 'context length "
            "M'\nset ylabel 'median ISR of the recalling heads'\nset key outside bottom\n"
            "set title 'trained heads (solid: pairs grow, dashed: 8 pairs, dotted: rope)'\nplot ";
        bool any = false;
        for (size_t i = 0; i < n_curves; ++i) {
          if (curves[i].M.empty()) continue;
          gp += fmt::format(
              "{}'{}' index {} using 1:2 with linespoints pt 7 {} lc {} title '{} {}{}'",
              any ? ", " : "", f, i, dash(curves[i].variant),
              plot_colour(static_cast<size_t>(curves[i].rule.kind)), curves[i].variant,
              to_string(curves[i].rule),
              curves[i].rule != curves[i].trained ? " (trained none)" : "");
          any = true;
        }
        gp += any ? "\n" : "1 notitle\n";
        gp += "set title 'the probe: softmax store, same d_k, beta = sqrt(d_k)'\nplot ";
        for (size_t i = 0; i < probe.result.rules.size(); ++i)
          gp += fmt::format("'{}' index {} using 1:2 with linespoints pt 7 lc {} title '{}'{}", f,
                            n_curves + i,
                            plot_colour(static_cast<size_t>(probe.result.rules[i].rule.kind)),
                            to_string(probe.result.rules[i].rule),
                            i + 1 < probe.result.rules.size() ? ", " : "\n");
        return gp + "unset multiplot\n";
      },
      1600, 600);
}

// The target: the trained heads' exponent within 0.15 of the random store's under that rule.
std::string verdict(const Reduced& r, const ProbeReference& probe) {
  // The target: the trained heads' exponent within 0.15 of the random store's under that rule.
  std::string verdict = "No log-M rule gave a fitted exponent (no recalling heads at two lengths).";
  if (r.best && probe.slope.count(r.best->second)) {
    const double gap = r.best->first - probe.slope.at(r.best->second);
    verdict = fmt::format(
        "The essay's test on the trained heads: under `{}`, the log-M rule with the lowest "
        "exponent, b = {:.3f} against {:.3f} for the random store under the same rule, {}.",
        to_string(r.best->second), r.best->first, probe.slope.at(r.best->second),
        std::abs(gap) <= 0.15 ? "within the 0.15 asked"
                              : fmt::format("{:.3f} beyond the 0.15 asked", std::abs(gap) - 0.15));
    if (r.fixed_none)
      verdict += fmt::format(
          " The ablation with the pairs fixed, where only the filler grows, gives b = {:.3f} "
          "under none: the trained heads all but ignore the filler, so the growth with the pairs "
          "comes from the added memories, whose keys were learned, not drawn at random.",
          *r.fixed_none);
  }
  return verdict;
}

}  // namespace

ExperimentResult write_extrapolation(const Experiment& experiment,
                                     const ExtrapolationFound& found) {
  const std::vector<int64_t>& lengths = found.lengths;
  const ProbeReference& probe = found.probe;
  const ProbeConfig& probing = probe.config;
  const Reduced r = reduce(found.curves, probe, lengths);
  const std::string store = write_extrapolation_store(experiment, found.store);
  experiment.write_json("extrapolation.json",
                        {{"config", "mqar-extrapolate"},
                         {"steps", found.steps},
                         {"points", points_json(found.points, experiment.config().out_dir)},
                         {"fits", r.fits},
                         {"probe",
                          {{"d_k", probing.d_k},
                           {"beta", probing.beta},
                           {"ref_len", probing.ref_len},
                           {"rules", probe_curves(probe)}}}});
  plot(experiment.path("extrapolation.png"), r, found.curves, probe);
  std::vector<std::string> acc_header{"pairs", "trained", "evaluated", "runs"};
  for (int64_t m : lengths) acc_header.push_back(fmt::format("{}x", m));
  acc_header.push_back("16x >= 0.95");
  acc_header.push_back("64x >= 0.9");
  ExperimentResult out;
  out.title = "Length extrapolation when recall depends on content only";
  out.json = "extrapolation.json";
  out.plot = "extrapolation.png";
  out.markdown = fmt::format(
      "`recall experiment extrapolation{}`: mqar-extrapolate (8 pairs in 32 tokens, 255 keys, no "
      "positions, the q, k, v convolution; {} steps) trained under rules {} ({} seed(s) each), "
      "read at {} x its length with the pairs growing with the length (`grow`, up to the 255 "
      "keys) and with the trained 8 pairs and filler (`fixed`); the none runs also read under "
      "qwen and yarn, which equal none up to L. The ablation `rope` is the same model with RoPE "
      "({} seed(s), rule none). Accuracy: mean [min, max] over the runs, and how many runs meet "
      "the long-context targets.\n\n{}\n"
      "ISR: the mean over the recalling heads of their median ISR at M tokens of context, "
      "averaged over the runs; b is the fitted exponent of ISR = c (M - 1)^b (the essay: 1/2 at "
      "a fixed beta, lower when beta grows with ln M), beside the probe's softmax store at d_k = "
      "{} and beta = sqrt(d_k) under the same rule.\n\n{}\n{}\n\n"
      "![extrapolation](extrapolation.png)\n\n{}",
      experiment.config().quick ? " --quick" : "", found.steps, rule_list(found.rules), found.seeds,
      fmt::join(lengths, ", "), found.variants.back().seeds,
      markdown_table(acc_header, r.accuracy_rows), probing.d_k,
      markdown_table({"pairs", "trained", "evaluated", "runs", "ISR by M", "fitted b", "probe b"},
                     r.rows),
      verdict(r, probe), store);
  return out;
}

}  // namespace recall::experiment_detail
