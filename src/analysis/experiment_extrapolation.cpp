// `recall experiment` extrapolation: beta rules with and without positions
// (recall/analysis/experiments.h).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "experiment.h"
#include "recall/analysis/experiments.h"
#include "recall/analysis/extrapolate.h"
#include "recall/analysis/inspect.h"
#include "recall/analysis/probe.h"
#include "recall/analysis/report.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/core/plot.h"
#include "recall/stores/theory.h"
#include "recall/train/trainer.h"

namespace recall::experiment_detail {

using nlohmann::json;

namespace {
std::string rule_list(const std::vector<BetaRule>& rules) {
  std::vector<std::string> names;
  for (BetaRule r : rules) names.push_back(to_string(r));
  return fmt::format("{}", fmt::join(names, ", "));
}
}  // namespace

ExperimentResult Experiment::extrapolation() {
  ReportConfig rc = ReportConfig::make(c_.out_dir, c_.quick);
  rc.mqar_steps = steps(rc.mqar_steps);
  const std::vector<int64_t> lengths = rc.inspect_lengths;
  // one per (pos, trained rule, rule at evaluation): the runs' mean ISR of their recalling heads,
  // gathered per context length M, then averaged over the runs
  struct Curve {
    std::string pos;
    BetaRule trained, rule;
    std::map<int64_t, std::vector<double>> isr_at;
    std::vector<double> M, isr;
    int64_t runs = 0;
  };
  // Without positions mqar-tiny learns recall far more slowly, if at all in its steps: half the
  // seeds, and in quick mode rule none alone.
  const int64_t nopos_seeds = std::max<int64_t>(1, rc.mqar_seeds / 2);
  const std::vector<BetaRule> nopos_rules =
      c_.quick ? std::vector<BetaRule>{BetaRule::kNone} : rc.mqar_rules;
  std::vector<Curve> curves;
  json out_points = json::array();
  for (const std::string pos : {"rope", "none"}) {
    // the rope runs are the report's section 3 runs, reused when the report made them
    ExtrapolateConfig ec;
    ec.train_config = "mqar-tiny";
    ec.sets = {fmt::format("steps={}", rc.mqar_steps)};
    if (pos == "none") ec.sets.push_back("pos=none");
    ec.out_dir = run_dir(pos == "rope" ? fmt::format("mqar-{}", rc.mqar_steps)
                                       : fmt::format("mqar-nopos-{}", rc.mqar_steps));
    ec.seeds = pos == "rope" ? rc.mqar_seeds : nopos_seeds;
    ec.rules = pos == "rope" ? rc.mqar_rules : nopos_rules;
    ec.lengths = {1};
    ec.batches = rc.extrapolate_batches;
    ec.progress = c_.progress;
    const auto trained = extrapolate(ec);
    for (const auto& t : trained) {
      auto own = std::find_if(curves.begin(), curves.end(), [&](const Curve& c) {
        return c.pos == pos && c.trained == t.trained && c.rule == t.trained;
      });
      if (own == curves.end()) curves.push_back({pos, t.trained, t.trained, {}, {}, {}, 0});
      if (t.accuracy < 0.9) continue;  // never formed its recall circuit: says nothing of length
      Restored r = restore(t.checkpoint);
      InspectConfig ic;
      ic.lengths = lengths;
      ic.rules = {t.trained};
      if (t.trained == BetaRule::kNone)
        ic.rules = {BetaRule::kNone, BetaRule::kQwen, BetaRule::kYarn};
      ic.batches = rc.extrapolate_batches;
      ic.ablate = false;  // the ISR of the recalling heads is all this experiment reads
      const InspectResult ir = inspect(r, ic, t.checkpoint);
      for (const auto& a : ir.attention) {
        std::vector<double> isr;
        for (const auto& h : a.heads)
          if (h.recalls()) isr.push_back(h.isr.median);
        out_points.push_back({{"pos", pos},
                              {"checkpoint", fs::relative(t.checkpoint, c_.out_dir).string()},
                              {"trained_rule", to_string(t.trained)},
                              {"rule", to_string(a.rule)},
                              {"M", a.seq_len},
                              {"accuracy", a.accuracy},
                              {"recalling_heads", isr.size()},
                              {"isr_median", isr.empty() ? json(nullptr) : json(mean(isr))}});
        auto c = std::find_if(curves.begin(), curves.end(), [&](const Curve& c) {
          return c.pos == pos && c.trained == t.trained && c.rule == a.rule;
        });
        if (c == curves.end()) {
          curves.push_back({pos, t.trained, a.rule, {}, {}, {}, 0});
          c = curves.end() - 1;
        }
        if (a.seq_len == lengths.front() * r.config.model.seq_len) ++c->runs;
        if (!isr.empty()) c->isr_at[a.seq_len].push_back(mean(isr));
      }
    }
  }
  for (auto& c : curves)
    for (const auto& [M, isr] : c.isr_at) {
      c.M.push_back(static_cast<double>(M));
      c.isr.push_back(mean(isr));
    }
  // the probe's softmax ISR under each rule at the heads' dimension, L = mqar-tiny's length
  const TrainConfig base = train_config_from_file("mqar-tiny", {});
  ProbeConfig pc;
  pc.stores = {"softmax"};
  pc.d_k = pc.d_v = base.model.head_dim();
  pc.beta = std::sqrt(static_cast<double>(pc.d_k));  // the standard scale on unit keys
  pc.ref_len = static_cast<double>(base.model.seq_len);
  pc.rule_m_max = base.model.seq_len * lengths.back();
  pc.m = {base.model.seq_len};
  pc.trials = c_.quick ? 1 : 4;
  pc.rules = {BetaRule::kNone, BetaRule::kSu, BetaRule::kQwen, BetaRule::kYarn};
  const auto probe = run_probe(pc);
  std::map<BetaRule, double> probe_slope;
  json probe_curves = json::array();
  for (const auto& rr : probe.rules) {
    std::vector<double> x, y;
    json pts = json::array();
    for (const auto& p : rr.curve) {
      x.push_back(std::log(static_cast<double>(p.M) - 1));
      y.push_back(std::log(std::max(p.isr.median, 1e-300)));
      pts.push_back({{"M", p.M}, {"beta", p.beta}, {"isr_median", p.isr.median}});
    }
    if (x.size() >= 2) probe_slope[rr.rule] = fitted_slope(x, y);
    probe_curves.push_back({{"rule", to_string(rr.rule)}, {"curve", pts}});
  }
  // fit ISR = c (M - 1)^b per curve (the essay: ISR^2 = (M - 1) E[w^2] / w(1)^2, so b = 1/2 at a
  // fixed beta, less when beta grows with M)
  json fits = json::array();
  std::vector<std::vector<std::string>> rows;
  std::ostringstream data;
  for (const auto& c : curves) {
    std::optional<double> b, lnc;
    if (c.M.size() >= 2) {
      std::vector<double> x, y;
      for (size_t i = 0; i < c.M.size(); ++i)
        x.push_back(std::log(c.M[i] - 1)), y.push_back(std::log(c.isr[i]));
      b = fitted_slope(x, y);
      lnc = mean(y) - *b * mean(x);
    }
    json probe_b = nullptr;
    std::string probe_b_text = "—";
    if (const auto it = probe_slope.find(c.rule); it != probe_slope.end()) {
      probe_b = it->second;
      probe_b_text = fmt::format("{:.3f}", it->second);
    }
    fits.push_back({{"pos", c.pos},
                    {"trained_rule", to_string(c.trained)},
                    {"rule", to_string(c.rule)},
                    {"runs", c.runs},
                    {"form", "ISR = c (M - 1)^b"},
                    {"b", b ? json(*b) : json(nullptr)},
                    {"c", lnc ? json(std::exp(*lnc)) : json(nullptr)},
                    {"probe_b", probe_b}});
    std::string isr_cells;
    for (size_t i = 0; i < c.M.size(); ++i)
      isr_cells += fmt::format("{}{:.0f}: {:.3g}", i ? ", " : "", c.M[i], c.isr[i]);
    rows.push_back(
        {c.pos, "`" + to_string(c.trained) + "`", "`" + to_string(c.rule) + "`",
         std::to_string(c.runs),
         isr_cells.empty() ? (c.runs ? "no recalling head" : "no run learned") : isr_cells,
         opt_num(b, "{:.3f}"), probe_b_text});
    for (size_t i = 0; i < c.M.size(); ++i) data << c.M[i] << ' ' << c.isr[i] << '\n';
    data << "\n\n";
  }
  const size_t n_curves = curves.size();
  for (const auto& rr : probe.rules) {
    for (const auto& p : rr.curve) data << p.M << ' ' << p.isr.median << '\n';
    data << "\n\n";
  }
  write_file_atomic(
      path("extrapolation.json"),
      json{{"points", out_points},
           {"fits", fits},
           {"probe",
            {{"d_k", pc.d_k}, {"beta", pc.beta}, {"ref_len", pc.ref_len}, {"rules", probe_curves}}}}
              .dump(2) +
          "\n");
  render_plot(
      path("extrapolation.png"), data.str(),
      [&](const std::string& f) {
        std::string gp =
            "set multiplot layout 1,2\nset grid\nset logscale xy 2\nset xlabel 'context length "
            "M'\nset ylabel 'median ISR of the recalling heads'\nset key outside bottom\n"
            "set title 'trained heads (solid: rope, dashed: pos none)'\nplot ";
        bool any = false;
        for (size_t i = 0; i < n_curves; ++i) {
          if (curves[i].M.empty()) continue;
          gp += fmt::format(
              "{}'{}' index {} using 1:2 with linespoints pt 7 {} lc {} title '{} {}{}'",
              any ? ", " : "", f, i, curves[i].pos == "rope" ? "dt 1" : "dt 2",
              plot_colour(static_cast<size_t>(curves[i].rule)), curves[i].pos,
              to_string(curves[i].rule),
              curves[i].rule != curves[i].trained ? " (trained none)" : "");
          any = true;
        }
        gp += any ? "\n" : "1 notitle\n";
        gp += "set title 'the probe: softmax store, same d_k, beta = sqrt(d_k)'\nplot ";
        for (size_t i = 0; i < probe.rules.size(); ++i)
          gp +=
              fmt::format("'{}' index {} using 1:2 with linespoints pt 7 lc {} title '{}'{}", f,
                          n_curves + i, plot_colour(static_cast<size_t>(probe.rules[i].rule)),
                          to_string(probe.rules[i].rule), i + 1 < probe.rules.size() ? ", " : "\n");
        return gp + "unset multiplot\n";
      },
      1600, 600);
  ExperimentResult out;
  out.title = "Length extrapolation with beta separated from positions";
  out.json = "extrapolation.json";
  out.plot = "extrapolation.png";
  out.markdown = fmt::format(
      "`recall experiment extrapolation{}`: mqar-tiny ({} steps) trained with `pos = rope` "
      "({} seed(s), rules {}) and `pos = none` ({} seed(s), rules {}), the none runs also "
      "evaluated under qwen and yarn; runs that reach 0.9 at their training length are "
      "inspected at {} x the length. ISR: the mean over the recalling heads of their median "
      "ISR at M tokens of context, averaged over the runs (runs: those that learned); b is the "
      "fitted exponent of ISR = c (M - 1)^b (the essay: "
      "1/2 at a fixed beta, lower when beta grows with ln M), beside the probe's softmax store "
      "at d_k = {} and beta = sqrt(d_k) under the same rule.\n\n{}\n"
      "![extrapolation](extrapolation.png)\n",
      c_.quick ? " --quick" : "", rc.mqar_steps, rc.mqar_seeds, rule_list(rc.mqar_rules),
      nopos_seeds, rule_list(nopos_rules), fmt::join(lengths, ", "), pc.d_k,
      markdown_table({"pos", "trained", "evaluated", "runs", "ISR by M", "fitted b", "probe b"},
                     rows));
  return out;
}

}  // namespace recall::experiment_detail
