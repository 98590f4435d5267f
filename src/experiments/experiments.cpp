#include "recall/experiments/experiments.h"

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
#include "experiment_extrapolation.h"
#include "experiment_facts.h"
#include "experiment_facts_kv.h"
#include "experiment_fit.h"
#include "experiment_heads.h"
#include "experiment_lm.h"
#include "experiment_mqar.h"
#include "experiment_probe.h"
#include "experiment_scaling.h"
#include "experiment_sharpness.h"
#include "experiment_theory.h"
#include "recall/analysis/extrapolate.h"
#include "recall/analysis/inspect.h"
#include "recall/analysis/probe.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/experiments/report.h"
#include "recall/formats/plot.h"
#include "recall/stores/theory.h"
#include "recall/train/metrics.h"
#include "recall/train/trainer.h"

namespace recall {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
using experiment_detail::Experiment;
using experiment_detail::write_extrapolation;
using experiment_detail::write_facts;
using experiment_detail::write_facts_kv;
using experiment_detail::write_fit;
using experiment_detail::write_heads;
using experiment_detail::write_lm;
using experiment_detail::write_mqar;
using experiment_detail::write_probe;
using experiment_detail::write_scaling;
using experiment_detail::write_sharpness;
using experiment_detail::write_theory;
// A row's run in two halves: what the experiment measures (experiment_<name>.cpp), then its writer
// (experiment_<name>_output.cpp: its files and its report section), so that a section's prose and
// the measurement behind it live apart.
template <class Found>
std::function<ExperimentResult(const ExperimentConfig&)> measure_then_write(
    Found (Experiment::*measure)(), ExperimentResult (*write)(const Experiment&, const Found&)) {
  return [measure, write](const ExperimentConfig& config) {
    Experiment experiment(config);
    const Found found = (experiment.*measure)();
    return write(experiment, found);
  };
}
}  // namespace

// The rows, each with its sizes: quick keeps each experiment's claim visible in about a minute of
// 2 cores, the default gives the seeds and points that the figures rest on.
const std::vector<ExperimentRow>& experiment_rows() {
  using R = std::vector<BetaRule>;
  static const std::vector<ExperimentRow> rows = {
      {"theory", "capacity of random stores from the exact theory, beside the essay's figures",
       false, [](ExperimentSizes&, bool) {}, measure_then_write(&Experiment::theory, write_theory)},
      {"probe", "the probe's measured capacities beside theory, and the ISR under each rule", false,
       [](ExperimentSizes& s, bool quick) {
         s.probe_trials = quick ? 2 : 8;
         // quick: 256 L, the curves at 16 L and 256 L in a quarter of the time
         s.probe_rule_m_max = int64_t{1} << (quick ? 18 : 22);
       },
       measure_then_write(&Experiment::probe, write_probe)},
      {"mqar", "mqar-extrapolate trained under each rule, accuracy at 1x to 64x its length", true,
       [](ExperimentSizes& s, bool quick) {
         // every seed forms its recall within a few hundred steps: quick keeps the steps and
         // drops seeds, rules and lengths
         s.mqar_steps = 1000;
         s.mqar_seeds = quick ? 2 : 5;
         s.mqar_rules = quick ? R{BetaRule::kNone, BetaRule::kSu}
                              : R{BetaRule::kNone, BetaRule::kSu, BetaRule::kSsmax};
         s.extrapolate_lengths =
             quick ? std::vector<int64_t>{1, 4, 16, 64} : std::vector<int64_t>{1, 2, 4, 16, 64};
         s.extrapolate_batches = 1;
       },
       measure_then_write(&Experiment::mqar, write_mqar)},
      {"heads", "which heads of mqar's rule-less run recall, and their ISR with the length", true,
       [](ExperimentSizes& s, bool quick) {
         // inspect reads every weight of the long prompts: quick stops at 16x
         s.inspect_lengths =
             quick ? std::vector<int64_t>{1, 4, 16} : std::vector<int64_t>{1, 2, 4, 16, 64};
       },
       measure_then_write(&Experiment::heads, write_heads)},
      {"fit", "trained stores against written ones of the same width", true,
       [](ExperimentSizes& s, bool quick) {
         s.fit_widths = quick ? std::vector<int64_t>{8} : std::vector<int64_t>{8, 16, 32, 64};
         s.fit_steps = quick ? 400 : 1000;
       },
       measure_then_write(&Experiment::fit, write_fit)},
      {"facts-kv", "facts in an MLP against learned key-values at equal parameters", true,
       [](ExperimentSizes& s, bool quick) { s.facts_kv_steps = quick ? 1500 : 8000; },
       measure_then_write(&Experiment::facts_kv, write_facts_kv)},
      {"sharpness", "mqar trained at attn_scale 0.25 to 8: accuracy, gradient and entropy", true,
       [](ExperimentSizes& s, bool quick) {
         // the default also goes past 8, where the logits of a trained head saturate
         s.sharpness_scales = {0.25, 0.5, 1, 2, 4, 8};
         if (!quick) s.sharpness_scales.push_back(32);
         s.sharpness_seeds = quick ? 1 : 3;
         // mqar-tiny's own budget; quick: 300 steps, where every scale has recalled (by step 200
         // at 2 threads) and the sweep's claims, at initialisation, hold whatever the steps
         s.sharpness_steps = quick ? 300 : 1000;
       },
       measure_then_write(&Experiment::sharpness, write_sharpness)},
      {"scaling", "capacity against d_k, relu power, exp terms and beta: slopes beside the essay's",
       false,
       [](ExperimentSizes& s, bool quick) {
         s.scaling_trials = quick ? 1 : 4;
         s.scaling_queries = quick ? 128 : 256;
         s.scaling_probe_limit = quick ? 20000 : 200000;
         s.scaling_dims = quick ? std::vector<int64_t>{16, 32, 64, 128}
                                : std::vector<int64_t>{16, 32, 64, 128, 256};
       },
       measure_then_write(&Experiment::scaling, write_scaling)},
      {"facts", "facts to saturation per feed-forward kind at equal parameters", true,
       [](ExperimentSizes& s, bool quick) {
         s.facts_exposures = quick ? 64 : 128;
         s.facts_grid =
             quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{2048, 4096, 8192, 16384};
         s.facts_longer = quick ? std::vector<int64_t>{2} : std::vector<int64_t>{2, 4};
       },
       measure_then_write(&Experiment::facts, write_facts)},
      {"lm", "learned key-values instead of the feed-forward layer, on language", true,
       [](ExperimentSizes& s, bool quick) {
         s.lm_seeds = quick ? 1 : 3;
         s.lm_steps = quick ? 150 : 600;
       },
       measure_then_write(&Experiment::lm, write_lm)},
      {"extrapolation",
       "length extrapolation with and without positions, and in the essay's store, per rule", true,
       [](ExperimentSizes& s, bool quick) {
         // the trained pairs: the rules mqar trains (quick: none alone)
         s.fixed_pairs_rules = quick ? R{BetaRule::kNone} : s.mqar_rules;
         s.reference_trials = quick ? 1 : 4;
         s.store_steps = 1000;
         s.store_seeds = quick ? 1 : 5;
         s.store_rules = quick ? R{BetaRule::kNone, BetaRule::kSu}
                               : R{BetaRule::kNone, BetaRule::kSu, BetaRule::kSsmax};
         s.store_lengths = quick ? std::vector<int64_t>{1, 16, 64}
                                 : std::vector<int64_t>{1, 4, 16, 32, 64, 128, 256};
       },
       measure_then_write(&Experiment::extrapolation, write_extrapolation)},
  };
  return rows;
}

ExperimentSizes experiment_sizes(bool quick) {
  ExperimentSizes s;
  for (const ExperimentRow& r : experiment_rows()) r.sizes(s, quick);
  return s;
}

const ExperimentRow& experiment_row(const std::string& name) {
  for (const ExperimentRow& r : experiment_rows())
    if (r.name == name) return r;
  throw std::invalid_argument(fmt::format("experiment '{}' is unknown: use one of {}", name,
                                          fmt::join(experiment_names(), ", ")));
}

std::vector<std::string> experiment_names() {
  std::vector<std::string> names;
  for (const ExperimentRow& r : experiment_rows()) names.push_back(r.name);
  return names;
}

void ExperimentConfig::validate() const {
  const ExperimentRow& row = experiment_row(name);
  check_arg(!out_dir.empty(), "--out is empty: give a folder for the experiment's files");
  check_arg(steps >= 0 && steps <= 10000000,
            fmt::format("--steps {}: must be in [0, 10000000] (0: the experiment's own)", steps));
  check_arg(steps == 0 || row.trains,
            fmt::format("--steps {}: the {} experiment trains nothing; drop --steps", steps, name));
  if (more_exposures.empty() && more_kinds.empty()) return;
  check_arg(name == "facts",
            fmt::format("--more-exposures, --more-kinds: only the facts experiment trains longer; "
                        "drop them for '{}'",
                        name));
  std::vector<std::string> kinds;
  for (const auto& v : experiment_detail::facts_variants()) kinds.push_back(v.name);
  for (const auto& k : more_kinds)
    check_arg((k == "all" && more_kinds.size() == 1) ||
                  std::find(kinds.begin(), kinds.end(), k) != kinds.end(),
              fmt::format("--more-kinds {}: use 'all' alone or names among {}",
                          fmt::join(more_kinds, ","), fmt::join(kinds, ", ")));
  const int64_t ranked = experiment_sizes(quick).facts_exposures;
  for (size_t i = 0; i < more_exposures.size(); ++i) {
    const int64_t e = more_exposures[i];
    check_arg(e > (i == 0 ? ranked : more_exposures[i - 1]) && e <= 1000000,
              fmt::format("--more-exposures {}: must be ascending, above the ranking's {} and at "
                          "most 1000000 (e.g. {},{})",
                          fmt::join(more_exposures, ","), ranked, 2 * ranked, 4 * ranked));
  }
}

std::optional<double> gain_per_doubling(double x0, double y0, double x1, double y1) {
  if (!(y0 > 0 && y1 > 0 && x0 > 0 && x1 > x0)) return std::nullopt;
  return std::pow(y1 / y0, 1.0 / std::log2(x1 / x0)) - 1;
}

bool plateau_reached(std::optional<double> gain) {
  return gain && *gain < 0.03;
}

double fitted_slope(const std::vector<double>& x, const std::vector<double>& y) {
  check_arg(x.size() == y.size() && x.size() >= 2, "fitted_slope: needs two or more points");
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  check_arg(sxx > 0, "fitted_slope: needs two distinct x");
  return sxy / sxx;
}

std::optional<int64_t> steps_to_accuracy(const std::string& run_dir, double target) {
  for (const auto& r : read_metrics(run_dir))
    if (r.eval && r.get("accuracy").value_or(0.0) >= target) return r.step;
  return std::nullopt;
}

ExperimentResult run_experiment(const ExperimentConfig& config) {
  config.validate();
  make_output_dir("--out", config.out_dir);
  const auto t0 = std::chrono::steady_clock::now();
  ExperimentResult r = experiment_row(config.name).run(config);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace recall
