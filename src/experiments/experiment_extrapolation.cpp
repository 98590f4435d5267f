// `recall experiment` extrapolation: recall from content alone to 64x its length, per beta rule
// (recall/experiments/experiments.h).
#include "experiment_extrapolation.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "recall/analysis/extrapolate.h"
#include "recall/analysis/forecast_report.h"
#include "recall/analysis/inspect.h"
#include "recall/analysis/isr_forecast.h"
#include "recall/analysis/probe.h"
#include "recall/experiments/extrapolate_runs.h"
#include "recall/train/trainer.h"

namespace recall::experiment_detail {

namespace {

// The runs: mqar-extrapolate (no positions, the q, k, v convolution) under each rule, read with
// the pairs growing with the length (M distinct memories) and with the trained 8 pairs (filler
// between the queries), and the ablation that shows what positions do: the same with RoPE.
std::vector<ExtrapolationVariant> plan_variants(const ExperimentSizes& size) {
  return {{"grow", {}, PairsAtLength::kGrow, size.mqar_seeds, size.mqar_rules},
          {"fixed", {}, PairsAtLength::kFixed, size.mqar_seeds, size.fixed_pairs_rules},
          {"rope",
           {"pos=rope"},
           PairsAtLength::kGrow,
           std::max<int64_t>(1, size.mqar_seeds / 2),
           {BetaRule::kNone}}};
}

// Trains (or reuses) the variant's runs under runs_dir, reads each with inspect (the recalling
// heads' ISR) and extrapolate (accuracy on every prompt, through the fast kernel), and adds them
// to their curves and to points.
void run_variant(const ExtrapolationVariant& v, const ExperimentSizes& size,
                 const std::vector<int64_t>& lengths, const std::string& runs_dir,
                 const RunContext& context, std::vector<ExtrapolationCurve>& curves,
                 std::vector<ExtrapolationPoint>& points) {
  const ExtrapolateRuns runs =
      extrapolation_runs(runs_dir, "mqar-extrapolate", v.name == "rope" ? "-rope" : "", v.sets,
                         size.mqar_steps, v.seeds, v.rules, context);
  ExtrapolateConfig extrapolation;
  extrapolation.lengths = {1};
  extrapolation.batches = size.extrapolate_batches;
  extrapolation.device = context.device;
  const auto trained = train_and_extrapolate(runs, extrapolation);
  for (const auto& t : trained) {
    Restored r = restore(t.checkpoint);
    InspectConfig inspection;
    inspection.lengths = lengths;
    inspection.pairs = v.pairs;
    // the rules that equal none up to L (qwen, yarn) read the none runs too
    inspection.rules = {t.trained};
    if (t.trained == BetaRule::kNone && v.name == "grow")
      for (BetaRule rule : rules_equal_to_none_within_training_length())
        inspection.rules.push_back(rule);
    inspection.batches = size.extrapolate_batches;
    inspection.ablate = false;  // the ISR of the recalling heads is all this experiment reads
    const InspectResult ir = inspect(r, inspection, t.checkpoint);
    // accuracy on every prompt of each length, through the fast kernel (inspect reads fewer)
    ExtrapolateConfig score;
    score.checkpoints = {t.checkpoint};
    score.rules = inspection.rules;
    score.lengths = lengths;
    score.batches = size.extrapolate_batches;
    score.pairs = v.pairs;
    score.device = context.device;
    const auto scored = extrapolate(score);
    for (const auto& a : ir.attention) {
      const auto p = std::find_if(scored.begin(), scored.end(), [&](const ExtrapolatePoint& p) {
        return p.rule == a.rule && p.seq_len == a.seq_len;
      });
      std::vector<double> isr;
      for (const auto& h : a.heads)
        if (h.recalls()) isr.push_back(h.isr.median);
      points.push_back({v.name, t.checkpoint, t.trained, a.rule, a.seq_len, a.pairs, p->accuracy,
                        isr.size(), isr.empty() ? std::nullopt : std::optional<double>(mean(isr))});
      auto c = std::find_if(curves.begin(), curves.end(), [&](const ExtrapolationCurve& c) {
        return c.variant == v.name && c.trained == t.trained && c.rule == a.rule;
      });
      if (c == curves.end()) {
        curves.push_back({v.name, t.trained, a.rule, {}, {}, {}, {}, 0});
        c = curves.end() - 1;
      }
      if (a.seq_len == lengths.front() * r.config.model.seq_len) ++c->runs;
      c->accuracy_at[p->multiple].push_back(p->accuracy);
      if (!isr.empty()) c->isr_at[a.seq_len].push_back(mean(isr));
    }
  }
}

ProbeReference probe_reference(int64_t max_multiple, int64_t trials) {
  // the probe's softmax ISR under each rule at the heads' dimension, L = the recipe's length
  const TrainConfig base = train_config_from_file("mqar-extrapolate", {});
  ProbeReference out;
  ProbeConfig& probing = out.config;
  probing.stores = {"softmax"};
  probing.d_k = probing.d_v = base.model.head_dim();
  probing.beta = std::sqrt(static_cast<double>(probing.d_k));  // the standard scale on unit keys
  probing.ref_len = static_cast<double>(base.model.seq_len);
  probing.rule_m_max = base.model.seq_len * max_multiple;
  probing.m = {base.model.seq_len};
  probing.trials = trials;
  probing.rules = {BetaRule::kNone, BetaRule::kSu, BetaRule::kQwen, BetaRule::kYarn};
  out.result = run_probe(probing);
  for (const auto& rr : out.result.rules) {
    std::vector<double> x, y;
    for (const auto& p : rr.curve) {
      x.push_back(std::log(static_cast<double>(p.M) - 1));
      y.push_back(std::log(std::max(p.isr.median, 1e-300)));
    }
    if (x.size() >= 2) out.slope[rr.rule] = fitted_slope(x, y);
  }
  return out;
}

// The forecast on the rule-less content-only runs read with the pairs growing (reading `batches`,
// recall forecast's default): no unit q and k, a model the forecast was not developed on. What
// those runs measured (their points) is set beside it, the ISR of their recalling heads and where
// their accuracy halves.
std::vector<StoreForecastRow> heldout_forecast(const ExtrapolationFound& found, int64_t batches) {
  std::vector<ForecastRun> runs;
  for (const auto& p : found.points)
    if (p.variant == "grow" && p.trained == BetaRule::kNone && p.rule == p.trained &&
        std::none_of(runs.begin(), runs.end(),
                     [&](const ForecastRun& r) { return r.checkpoint == p.checkpoint; }))
      runs.push_back({p.checkpoint, p.trained});
  auto rows = forecast_rows(
      runs, found.lengths, batches, [&](Restored& r, const std::string& checkpoint, BetaRule rule) {
        std::vector<std::optional<double>> out;
        for (int64_t m : found.lengths) {
          const auto p = std::find_if(found.points.begin(), found.points.end(), [&](const auto& p) {
            return p.variant == "grow" && p.checkpoint == checkpoint && p.rule == rule &&
                   p.M == m * r.config.model.seq_len;
          });
          out.push_back(p == found.points.end() ? std::nullopt : p->isr_median);
        }
        return out;
      });
  for (auto& row : rows) {
    const auto c = std::find_if(found.curves.begin(), found.curves.end(), [&](const auto& c) {
      return c.variant == "grow" && c.trained == row.trained && c.rule == row.rule;
    });
    if (c == found.curves.end()) continue;
    std::vector<double> accuracy;  // the runs' mean at each multiple
    for (int64_t m : found.lengths) accuracy.push_back(mean(c->accuracy_at.at(m)));
    row.halving = crossing(row.pairs, accuracy, 0.5, /*rising=*/false, /*log_y=*/false);
  }
  return rows;
}

}  // namespace

ExtrapolationFound Experiment::extrapolation() {
  ExperimentSizes size = sizes();
  size.mqar_steps = steps(size.mqar_steps);
  size.store_steps = steps(size.store_steps);
  ExtrapolationFound found;
  found.steps = size.mqar_steps;
  found.seeds = size.mqar_seeds;
  found.rules = size.mqar_rules;
  // inspect reads every weight of the long prompts: quick stops at 16x
  found.lengths = size.inspect_lengths;
  const std::vector<int64_t>& lengths = found.lengths;
  found.variants = plan_variants(size);
  for (const ExtrapolationVariant& v : found.variants)
    run_variant(v, size, lengths, run_dir(""), context(), found.curves, found.points);
  for (auto& c : found.curves)
    for (const auto& [M, isr] : c.isr_at) {
      c.M.push_back(static_cast<double>(M));
      c.isr.push_back(mean(isr));
    }
  found.probe = probe_reference(lengths.back(), size.reference_trials);
  found.store = extrapolation_store(size);
  found.store.heldout = heldout_forecast(found, ForecastConfig{}.batches);
  return found;
}

}  // namespace recall::experiment_detail
