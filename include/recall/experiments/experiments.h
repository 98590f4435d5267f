// The essay's claims as experiments. Each is a command (`recall experiment NAME --out DIR`) that
// writes its JSON file (and a plot) into DIR (its training runs under DIR/runs/), and a section of
// `recall report`, in the order of experiment_rows() (src/experiments/experiments.cpp):
//
//   theory (theory.json): capacity of random stores, exact theory beside the essay
//   probe (probe.json): the probe's measured capacities and each rule's ISR
//   mqar (extrapolate.json): mqar-extrapolate per rule, accuracy at 1x .. 64x its length
//   heads (inspect.json): which heads of mqar's rule-less run recall, their ISR
//   fit (fit.json): trained stores against written ones of the same width
//   facts-kv (facts.json): facts in an MLP against learned key-values at equal parameters
//   sharpness (beta_sweep.json): mqar-tiny at attn_scale 0.25 .. 8: accuracy, steps to 99 %,
//       the logit gradient and softmax entropy at initialisation and after training
//   scaling (scaling.json): capacity against d_k, relu power, exp terms and beta, fitted
//       log-log slopes beside the essay's forms
//   facts (facts_sweep.json): facts to saturation per feed-forward kind at equal parameters,
//       bits per parameter at the plateau
//   lm (lm.json): the text task at equal parameters: mlp, swiglu, learned_kv, and attention
//       alone with learned memory key-values
//   extrapolation (extrapolation.json, extrapolation_store.json): mqar-extrapolate per rule to
//       64x, pairs growing or fixed, a RoPE ablation, the heads' ISR against M beside the
//       probe's; then the essay's store (mqar-store) and its forecast
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "recall/models/transformer.h"
#include "recall/stores/beta_rule.h"
#include "recall/train/task.h"
#include "recall/train/trainer.h"

namespace recall {

struct ExperimentConfig {
  std::string name;     // one of experiment_names()
  std::string out_dir;  // the JSON, the plot, and runs/ for the trained models
  bool quick = false;   // fewer points, seeds and steps: rough numbers in about a minute each
  // How every run trains and where runs train and are evaluated; a stop request stops a run after
  // its checkpoint, and the experiment with StopRequested; the same call resumes.
  RunContext run;
  int64_t steps = 0;  // training steps of every run (0: the experiment's own for quick or not)
  // facts: the exposures per fact at which the kinds of more_kinds are trained again, each at its
  // largest table, to show whether more training still raises bits per parameter (empty: 2x and
  // 4x the ranking's exposures; quick: 2x). Ascending, each above the ranking's.
  std::vector<int64_t> more_exposures;
  // facts: the kinds trained longer (their names, or "all"; empty: the best kind).
  std::vector<std::string> more_kinds;
  // Throws std::invalid_argument naming the value and the accepted names.
  void validate() const;
};

struct ExperimentResult {
  std::string title;     // the report section's title
  std::string json;      // file names in out_dir
  std::string plot;      // empty for an experiment without one
  std::string markdown;  // the section's body: what was run, tables, the plot
  double seconds = 0;
};

// Every experiment's sizes, a block per row of experiment_rows(), each block set, quick or not, by
// its row's `sizes`. A later row reads an earlier one's block where it reads that row's runs
// (heads and extrapolation train and read mqar's runs at mqar's sizes).
struct ExperimentSizes {
  // probe: trials per point, and the largest M of the rule curves (M = L, 2L, ...; L = 1024)
  int64_t probe_trials = 0, probe_rule_m_max = 0;
  // mqar: mqar-extrapolate's steps, seeds per rule, the rules trained (none first: its runs are
  // also read under qwen and yarn, which leave beta unchanged up to the training length), the
  // multiples of its length scored, and the evaluation batches per point
  int64_t mqar_steps = 0, mqar_seeds = 0, extrapolate_batches = 0;
  std::vector<BetaRule> mqar_rules;
  std::vector<int64_t> extrapolate_lengths;
  // heads: the multiples at which mqar's heads are read (extrapolation's curves too)
  std::vector<int64_t> inspect_lengths;
  // fit: the stores' widths and the steps of each fit
  std::vector<int64_t> fit_widths;
  int64_t fit_steps = 0;
  // facts-kv: the steps of each run
  int64_t facts_kv_steps = 0;
  // sharpness: the attn_scale values, seeds per value and steps
  std::vector<double> sharpness_scales;
  int64_t sharpness_seeds = 0, sharpness_steps = 0;
  // scaling: the probe's trials and queries, the largest theory capacity probed, the d_k swept
  int64_t scaling_trials = 0, scaling_queries = 0;
  double scaling_probe_limit = 0;
  std::vector<int64_t> scaling_dims;
  // facts: exposures per fact (steps x batch / facts) at which the kinds are ranked, the numbers of
  // facts, and the multiples of the largest table's steps at which the best kind trains again
  int64_t facts_exposures = 0;
  std::vector<int64_t> facts_grid;
  std::vector<int64_t> facts_longer;
  // lm: seeds per kind and steps
  int64_t lm_seeds = 0, lm_steps = 0;
  // extrapolation: the rules of the variant with the trained pairs (the growing one takes mqar's),
  // the random-store probe's trials beside the heads, then mqar-store (the essay's store: unit q
  // and k, beta fixed): steps, seeds per rule, the rules trained (qwen and yarn equal none up to
  // L: the none runs are read under them) and the multiples scored
  std::vector<BetaRule> fixed_pairs_rules;
  int64_t reference_trials = 0;
  int64_t store_steps = 0, store_seeds = 0;
  std::vector<BetaRule> store_rules;
  std::vector<int64_t> store_lengths;
};

// One row per experiment, in the report's order: `recall experiment NAME` runs one row, `recall
// report` every row, its sections 1 to 11 in this order. Adding an experiment is a row
// (experiments.cpp) and its files src/experiments/experiment_<name>{.h,.cpp,_output.cpp}: what it
// measures and its writer (README, "Adding an experiment").
struct ExperimentRow {
  std::string name;
  std::string claim;  // what it shows, in one line: the help and the report's progress
  bool trains;        // it trains models (--steps sets their steps)
  // Sets the row's block of ExperimentSizes, quick (rough numbers in about a minute) or not.
  std::function<void(ExperimentSizes&, bool quick)> sizes;
  // Measures, then writes its files into config.out_dir and returns its section, reusing the runs
  // found in config.out_dir/runs.
  std::function<ExperimentResult(const ExperimentConfig&)> run;
};
const std::vector<ExperimentRow>& experiment_rows();
// The row named `name`; throws std::invalid_argument naming the names.
const ExperimentRow& experiment_row(const std::string& name);
std::vector<std::string> experiment_names();

// Every row's sizes, quick or not.
ExperimentSizes experiment_sizes(bool quick);

// Runs (or, where its runs exist in out_dir/runs, reuses) one experiment and writes its files.
ExperimentResult run_experiment(const ExperimentConfig& config);

// Least-squares slope of y against x (both as given: pass logs for a log-log slope); needs two
// distinct x.
double fitted_slope(const std::vector<double>& x, const std::vector<double>& y);

// The gain of y from x0 to x1 as a gain per doubling of x, (y1 / y0)^(1 / log2(x1 / x0)) - 1, so
// that steps of any ratio compare (the facts experiment's plateau test: bits per parameter against
// training steps). nullopt unless y0, y1 > 0 and x1 > x0 > 0.
std::optional<double> gain_per_doubling(double x0, double y0, double x1, double y1);
// Whether a chain whose last link gained `gain` per doubling has reached its plateau: more training
// no longer raises bits per parameter by 3 % a doubling (a fall counts too). False without a gain.
bool plateau_reached(std::optional<double> gain);

// The first step at which a run's evaluation accuracy was >= target (recall/train/metrics.h);
// nullopt if none.
std::optional<int64_t> steps_to_accuracy(const std::string& run_dir, double target);

}  // namespace recall
