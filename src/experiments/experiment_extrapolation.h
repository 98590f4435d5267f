// Report section 11, extrapolation: what it measures (experiment_extrapolation.cpp, its second
// part experiment_extrapolation_store.cpp and the store's prescription,
// experiment_store_prescription.cpp) and its writers (experiment_extrapolation_output.cpp, and
// experiment_extrapolation_store_output.cpp for the store part and its prescription).
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "experiment.h"
#include "recall/analysis/extrapolate.h"
#include "recall/analysis/probe.h"
#include "recall/train/train_config.h"
#include "recall/train/trainer.h"

namespace recall::experiment_detail {

// A set of runs and how they are read: the recipe's sets, the pairs at longer lengths, the
// seeds and the rules trained.
struct ExtrapolationVariant {
  std::string name;
  std::vector<std::string> sets;
  PairsAtLength pairs;
  int64_t seeds;
  std::vector<BetaRule> rules;
};

// one per (variant, trained rule, rule at evaluation): the runs' mean ISR of their recalling
// heads per context length M, averaged over the runs, and each run's accuracy per multiple
struct ExtrapolationCurve {
  std::string variant;
  BetaRule trained, rule;
  std::map<int64_t, std::vector<double>> isr_at, accuracy_at;
  std::vector<double> M, isr;
  int64_t runs = 0;
};

// One run of a variant read at M tokens under one rule (extrapolation.json's points).
struct ExtrapolationPoint {
  std::string variant;     // the variant's name
  std::string checkpoint;  // the run's checkpoint, as trained (not relative to --out)
  BetaRule trained = BetaRule::kNone, rule = BetaRule::kNone;  // trained under, read under
  int64_t M = 0, pairs = 0;          // tokens of context, and mqar pairs in each prompt
  double accuracy = 0;               // on every prompt of that length, through the fast kernel
  size_t recalling_heads = 0;        // the heads that recall at that length
  std::optional<double> isr_median;  // their mean median ISR; none without a recalling head
};

// The probe's softmax store at the trained heads' dimension, under each rule: its ISR against M
// and the fitted exponent, the reference the trained heads are read against.
struct ProbeReference {
  ProbeConfig config;
  ProbeResult result;
  std::map<BetaRule, double> slope;  // per rule, of log ISR on log (M - 1), where two points
};

// The accuracy each run reached at each multiple, per (trained rule, rule at evaluation).
using StoreRunAccuracy =
    std::map<std::pair<BetaRule, BetaRule>, std::map<int64_t, std::vector<double>>>;

// The essay's test: the first multiple at which the rule-less runs' mean accuracy falls below
// 0.5, and there the log-M rule that the most runs hold at >= 0.95.
struct StoreTarget {
  int64_t multiple = 0, pairs = 0;
  double none_mean = 0;
  BetaRule best = BetaRule::kNone;
  int64_t holding = 0, runs = 0;
  bool met() const { return multiple > 0 && runs > 0 && 5 * holding >= 4 * runs; }
};

// inspect keeps every head's weights, B H T^2 per layer: it reads the longer prompts up to 64x
constexpr int64_t kMeasuredMultiple = 64;

// The forecast from the training length beside what the longer prompts measured: per (trained
// rule, rule at evaluation), the mean over the runs of the forecast ISR at each multiple, the
// memories at which it reaches 1, and the memories at which the runs' mean accuracy falls through
// 0.5.
struct StoreForecastRow {
  BetaRule trained = BetaRule::kNone, rule = BetaRule::kNone;
  int64_t runs = 0;
  std::vector<int64_t> pairs;
  std::vector<double> isr;  // mean over runs
  // what inspect measured at the longer prompts (mean over runs of the recalling heads' mean
  // median ISR; up to kMeasuredMultiple), and a random store's median ISR under the same rule
  std::vector<std::optional<double>> measured, random;
  double beta = 0, gap_median = 0, gap_p10 = 0;
  std::optional<double> overflow, halving;
  // the worst miss of a run's forecast, max(f / m, m / f) over the runs and the multiples measured
  double worst_miss = 1;
};

// A trained run the forecast reads: its checkpoint and the rule it was trained under.
struct ForecastRun {
  std::string checkpoint;
  BetaRule trained = BetaRule::kNone;
};
// What the longer prompts measured of a run under a rule: the recalling heads' mean median ISR per
// multiple of the forecast (none where not read).
using MeasuredIsr = std::function<std::vector<std::optional<double>>(
    Restored& run, const std::string& checkpoint, BetaRule rule)>;
// Per (trained rule, rule at evaluation), each run's forecast at `lengths` from its training
// length alone (forecast_isr), averaged over the runs, beside what `measured` says of the same run:
// a run is read under its own rule and, rule-less, under the rules equal to none within the
// training length. Fills every field but halving and random (none at every multiple).
std::vector<StoreForecastRow> forecast_rows(const std::vector<ForecastRun>& runs,
                                            const std::vector<int64_t>& lengths, int64_t batches,
                                            const MeasuredIsr& measured);

// One prescription of one run and what the run measured at the target under log:c and log:(c/2).
struct PrescriptionMeasured {
  std::optional<double> c, at_c, at_half;
};

// A rule-less run (at 1x) and its prescription measured.
struct PrescribedRun {
  std::string checkpoint;            // as trained (not relative to --out)
  double accuracy_at_1x = 0;         // the run's own accuracy at the training length
  PrescriptionMeasured by_accuracy;  // the c on the forecast accuracy, and the accuracy there
};

// The store's prescription set against its measurement (experiment_store_prescription.cpp): per
// rule-less run among the store's points (at 1x), the c that recall forecast prescribes to
// `target`x on the forecast accuracy, and the run's accuracy there under log:c and log:(c/2).
struct StorePrescriptionFound {
  int64_t target = 0;               // the multiple prescribed to and measured at
  double accuracy = 0;              // the forecast accuracy the prescription holds to
  std::vector<PrescribedRun> runs;  // empty without a rule-less run
};
StorePrescriptionFound store_prescription(const std::vector<ExtrapolatePoint>& points,
                                          int64_t target, int64_t batches,
                                          const torch::Device& device);

// extrapolation's second part: mqar-store trained under the store's rules and scored at its
// lengths, the forecast from the training length beside the measurement, and the prescription.
struct ExtrapolationStoreFound {
  int64_t steps = 0, seeds = 0;          // per run (--steps applied), and per rule
  std::vector<BetaRule> rules;           // the rules trained
  std::vector<int64_t> lengths;          // the multiples of the training length read
  std::vector<std::string> unlearned;    // the runs below 0.9 at 1x, left out
  std::vector<ExtrapolatePoint> points;  // the runs that learned, at every multiple and rule
  std::vector<ExtrapolateCurve> curves;  // their mean accuracy per (trained rule, rule)
  StoreRunAccuracy runs;                 // each run's accuracy per (trained rule, rule), multiple
  std::optional<StoreTarget> target;     // none where the rule-less runs never fall below 0.5
  TrainConfig recipe;                    // mqar-store as trained (beta, keys, values)
  std::vector<StoreForecastRow> forecasts;  // with the random store's ISR filled in
  StorePrescriptionFound prescription;
  // held out: the same forecast on the first part's content-only runs (pairs growing), a model it
  // was not developed on, beside the ISR and accuracy that part measured
  std::vector<StoreForecastRow> heldout;
};
// Writes extrapolation_store.json, extrapolation_store.png and extrapolation_store_isr.png; returns
// the part's Markdown.
std::string write_extrapolation_store(const Experiment& experiment,
                                      const ExtrapolationStoreFound& found);

// mqar-extrapolate per rule read with inspect and extrapolate to 64x its length (pairs growing,
// pairs fixed, and with RoPE), the probe's softmax store beside it, and the store part.
struct ExtrapolationFound {
  int64_t steps = 0, seeds = 0;  // mqar-extrapolate's, per run (--steps applied), and per rule
  std::vector<BetaRule> rules;   // the rules mqar-extrapolate trains
  std::vector<int64_t> lengths;  // the multiples inspect reads
  std::vector<ExtrapolationVariant> variants;  // grow, fixed, rope
  std::vector<ExtrapolationPoint> points;      // every run's, at every length and rule read
  std::vector<ExtrapolationCurve> curves;      // with M and isr filled in from isr_at
  ProbeReference probe;
  ExtrapolationStoreFound store;
};
ExperimentResult write_extrapolation(const Experiment& experiment, const ExtrapolationFound& found);

}  // namespace recall::experiment_detail
