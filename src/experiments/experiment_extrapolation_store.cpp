// `recall experiment extrapolation`, its second part: the essay's softmax store inside a trained
// model. mqar-store has unit queries and keys per head and a stated beta, so nothing in training
// can buy a margin past what beta allows; with 8,192 keys the memories in context can grow to 256x
// the trained 8, and whether beta grows with ln M decides recall.
#include <algorithm>
#include <map>

#include "experiment_extrapolation.h"
#include "recall/analysis/extrapolate.h"
#include "recall/analysis/forecast_report.h"
#include "recall/analysis/inspect.h"
#include "recall/analysis/isr_forecast.h"
#include "recall/analysis/probe.h"
#include "recall/experiments/extrapolate_runs.h"

namespace recall::experiment_detail {

namespace {

StoreRunAccuracy per_run(const std::vector<ExtrapolatePoint>& points) {
  StoreRunAccuracy out;
  for (const auto& p : points) out[{p.trained, p.rule}][p.multiple].push_back(p.accuracy);
  return out;
}

std::optional<StoreTarget> find_target(const std::vector<ExtrapolateCurve>& curves,
                                       const StoreRunAccuracy& runs) {
  const auto none = std::find_if(curves.begin(), curves.end(), [](const ExtrapolateCurve& c) {
    return c.trained == BetaRule::kNone && c.rule == BetaRule::kNone;
  });
  if (none == curves.end()) return std::nullopt;
  for (size_t i = 0; i < none->multiples.size(); ++i) {
    if (none->accuracy[i] >= 0.5) continue;
    StoreTarget t{none->multiples[i], none->pairs[i], none->accuracy[i]};
    for (const auto& c : curves) {
      if (c.rule == BetaRule::kNone) continue;
      const auto& a = runs.at({c.trained, c.rule}).at(t.multiple);
      const int64_t holding = std::count_if(a.begin(), a.end(), [](double x) { return x >= 0.95; });
      if (t.runs == 0 || holding * t.runs > t.holding * static_cast<int64_t>(a.size())) {
        t.best = c.rule;
        t.holding = holding;
        t.runs = static_cast<int64_t>(a.size());
      }
    }
    return t;
  }
  return std::nullopt;
}

// The recalling heads' ISR that inspect measures at each of `lengths` (none past
// kMeasuredMultiple) under `rule`: the mean of their median over the heads that recall at the first
// length, the training length, the heads the forecast reads (a head that stops recalling stays in).
std::vector<std::optional<double>> measured_isr(Restored& r, const std::string& checkpoint,
                                                BetaRule rule, const std::vector<int64_t>& lengths,
                                                int64_t batches) {
  InspectConfig inspection;
  inspection.lengths.clear();
  for (int64_t m : lengths)
    if (m <= kMeasuredMultiple) inspection.lengths.push_back(m);
  inspection.rules = {rule};
  inspection.batches = batches;
  inspection.ablate = false;
  inspection.pairs = PairsAtLength::kGrow;
  const InspectResult ir = inspect(r, inspection, checkpoint);
  std::vector<std::optional<double>> out(lengths.size());
  if (ir.attention.empty()) return out;
  std::vector<bool> read;  // per head: recalls at the training length
  for (const auto& h : ir.attention.front().heads) read.push_back(h.recalls());
  for (size_t i = 0; i < inspection.lengths.size() && i < ir.attention.size(); ++i) {
    std::vector<double> isr;
    const auto& heads = ir.attention[i].heads;
    for (size_t h = 0; h < heads.size() && h < read.size(); ++h)
      if (read[h]) isr.push_back(heads[h].isr.median);
    if (!isr.empty()) out[i] = mean(isr);
  }
  return out;
}

// The probe's softmax store as the trained heads hold it: unit keys at d_k = d_head and the
// recipe's beta, as many keys as the context holds tokens (4 per memory, L = the training length
// for the rules), read against the memories: its median ISR per rule at each multiple.
std::map<BetaRule, std::vector<std::optional<double>>> random_store_isr(
    const TrainConfig& recipe, const std::vector<int64_t>& lengths, int64_t trials) {
  ProbeConfig probing;
  probing.stores = {"softmax"};
  probing.d_k = probing.d_v = recipe.model.head_dim();
  probing.beta = recipe.model.attn_scale;
  probing.ref_len = static_cast<double>(recipe.model.seq_len);
  probing.rule_m_max = recipe.model.seq_len * lengths.back();
  probing.m = {recipe.model.seq_len};
  probing.trials = trials;
  const ProbeResult pr = run_probe(probing);
  std::map<BetaRule, std::vector<std::optional<double>>> out;
  for (const auto& rr : pr.rules) {
    auto& v = out[rr.rule];
    v.resize(lengths.size());
    for (size_t i = 0; i < lengths.size(); ++i)
      for (const auto& p : rr.curve)
        if (p.M == lengths[i] * recipe.model.seq_len) v[i] = p.isr.median;
  }
  return out;
}

}  // namespace

std::vector<StoreForecastRow> forecast_rows(const std::vector<ForecastRun>& runs,
                                            const std::vector<int64_t>& lengths, int64_t batches,
                                            const MeasuredIsr& measured_of) {
  std::vector<StoreForecastRow> rows;
  std::map<std::pair<BetaRule, BetaRule>, std::vector<std::vector<double>>> measured;
  for (const ForecastRun& run : runs) {
    // named, not a structured binding: C++17 lambdas cannot capture those (clang rejects it)
    const std::string& checkpoint = run.checkpoint;
    const BetaRule trained = run.trained;
    Restored r = restore(checkpoint);
    // the rules that equal none up to L (qwen, yarn) read the none runs; the rest their own rule
    std::vector<BetaRule> rules{trained};
    if (trained == BetaRule::kNone)
      for (BetaRule rule : rules_equal_to_none_within_training_length()) rules.push_back(rule);
    std::map<BetaRule, std::vector<std::optional<double>>> run_measured;
    for (BetaRule rule : rules) {
      const auto m = measured_of(r, checkpoint, rule);
      run_measured[rule] = m;
      auto& sums = measured[{trained, rule}];
      sums.resize(lengths.size());
      for (size_t i = 0; i < m.size(); ++i)
        if (m[i]) sums[i].push_back(*m[i]);
    }
    for (const auto& f : forecast_isr(r.model, r.config, lengths, rules, batches)) {
      auto row = std::find_if(rows.begin(), rows.end(), [&](const StoreForecastRow& x) {
        return x.trained == trained && x.rule == f.rule;
      });
      if (row == rows.end()) {
        StoreForecastRow fresh;
        fresh.trained = trained;
        fresh.rule = f.rule;
        fresh.pairs = f.pairs;
        fresh.isr.assign(f.isr.size(), 0.0);
        fresh.random.resize(f.isr.size());
        rows.push_back(fresh);
        row = rows.end() - 1;
      }
      for (size_t i = 0; i < f.isr.size(); ++i) {
        row->isr[i] += f.isr[i];
        const auto& m = run_measured[f.rule][i];
        if (m && *m > 0 && f.isr[i] > 0)
          row->worst_miss = std::max({row->worst_miss, f.isr[i] / *m, *m / f.isr[i]});
      }
      row->beta += f.beta;
      row->gap_median += f.gap_median;
      row->gap_p10 += f.gap_p10;
      ++row->runs;
    }
  }
  for (auto& row : rows) {
    const double n = static_cast<double>(std::max<int64_t>(1, row.runs));
    for (double& isr : row.isr) isr /= n;
    row.beta /= n;
    row.gap_median /= n;
    row.gap_p10 /= n;
    row.overflow = crossing(row.pairs, row.isr);
    for (const auto& m : measured[{row.trained, row.rule}])
      row.measured.push_back(m.empty() ? std::nullopt : std::optional<double>(mean(m)));
  }
  return rows;
}

namespace {

// Trains (or reuses) mqar-store under each of the report's rules and seeds, scores it at the
// store's lengths (the none runs also under qwen and yarn) and returns the points of the runs
// that learned at 1x; `unlearned` gets the others.
std::vector<ExtrapolatePoint> store_points(const ExperimentSizes& size, const RunContext& context,
                                           const std::string& runs_dir,
                                           std::vector<std::string>& unlearned) {
  const ExtrapolateRuns runs = extrapolation_runs(runs_dir, "mqar-store", "", {}, size.store_steps,
                                                  size.store_seeds, size.store_rules, context);
  ExtrapolateConfig extrapolation;
  extrapolation.none_also = rules_equal_to_none_within_training_length();
  extrapolation.lengths = size.store_lengths;
  extrapolation.pairs = PairsAtLength::kGrow;
  extrapolation.batches = size.extrapolate_batches;
  extrapolation.device = context.device;
  const auto points = train_and_extrapolate(runs, extrapolation);
  unlearned = unlearned_runs(points);
  if (unlearned.size() * 2 > static_cast<size_t>(size.store_seeds) * size.store_rules.size())
    throw std::runtime_error("experiment extrapolation: most mqar-store runs did not learn at 1x");
  return learned_points(points, unlearned);
}

}  // namespace

ExtrapolationStoreFound Experiment::extrapolation_store(const ExperimentSizes& size) {
  ExtrapolationStoreFound found;
  found.steps = size.store_steps;
  found.seeds = size.store_seeds;
  found.rules = size.store_rules;
  found.lengths = size.store_lengths;
  found.points = store_points(size, context(), run_dir(""), found.unlearned);
  const auto& points = found.points;
  found.curves = extrapolate_curves(points);
  const auto& curves = found.curves;
  found.runs = per_run(points);
  found.target = find_target(curves, found.runs);
  found.recipe = train_config_from_file("mqar-store", {});
  auto& forecasts = found.forecasts;
  std::vector<ForecastRun> runs;  // each run that learned, once
  for (const auto& p : points)
    if (p.multiple == size.store_lengths.front() && p.rule == p.trained)
      runs.push_back({p.checkpoint, p.trained});
  // the forecast reads as recall forecast does by default, as the prescription below does
  forecasts = forecast_rows(runs, size.store_lengths, ForecastConfig{}.batches,
                            [&](Restored& r, const std::string& checkpoint, BetaRule rule) {
                              return measured_isr(r, checkpoint, rule, size.store_lengths,
                                                  size.extrapolate_batches);
                            });
  for (auto& row : forecasts) {
    const auto c = std::find_if(curves.begin(), curves.end(), [&](const ExtrapolateCurve& c) {
      return c.trained == row.trained && c.rule == row.rule;
    });
    if (c != curves.end())
      row.halving = crossing(c->pairs, c->accuracy, 0.5, /*rising=*/false, /*log_y=*/false);
  }
  const auto random = random_store_isr(found.recipe, size.store_lengths, size.reference_trials);
  for (auto& f : forecasts)
    f.random =
        random.count(f.rule) ? random.at(f.rule) : std::vector<std::optional<double>>(f.isr.size());
  found.prescription = store_prescription(points, size.store_lengths.back(),
                                          size.extrapolate_batches, context().device);
  return found;
}

}  // namespace recall::experiment_detail
