// recall report: the essay's reproduction and the trained-model experiments at toy size, in one
// Markdown report with PNG plots: every row of experiment_rows() (recall/experiments/
// experiments.h) in order, one section each: the theory and the probe of random stores, mqar
// trained under each rule and its heads, trained against written stores, facts, then sharpness,
// scaling laws, facts to saturation per feed-forward kind, learned key-values on language, and
// length extrapolation with and without positions and in the essay's store. ReportConfig holds
// every experiment's sizes, quick or not.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "recall/stores/beta_rule.h"
#include "recall/train/trainer.h"

namespace recall {

struct ReportConfig {
  std::string out_dir;  // report.md, plots and JSON; training runs under out_dir/runs
  bool quick = false;
  // How every run trains (a line per step on stderr with progress). The stop callback is also
  // polled between sections: non-zero stops the report (training runs after a checkpoint) with
  // StopRequested (recall/core/signals.h); the same call resumes.
  RunContext run;

  // The sizes of each experiment, set from quick.
  int64_t probe_trials = 8;
  // the largest M of the probe's rule curves (M = L, 2L, ...; L = 1024)
  int64_t probe_rule_m_max = int64_t{1} << 22;
  // mqar-extrapolate: steps, seeds per rule, evaluation batches per point
  int64_t mqar_steps = 1000, mqar_seeds = 5, extrapolate_batches = 1;
  // the rules mqar-extrapolate is trained under (none first: its runs are also evaluated under
  // qwen and yarn, which leave beta unchanged up to the training length)
  std::vector<BetaRule> mqar_rules = {BetaRule::kNone, BetaRule::kSu, BetaRule::kSsmax};
  std::vector<int64_t> extrapolate_lengths = {1, 2, 4, 16, 64};
  // mqar-store (the essay's store: unit q and k, beta fixed): steps, seeds per rule, the rules
  // trained (qwen and yarn equal none up to L: the none runs are read under them) and the lengths
  int64_t store_steps = 1000, store_seeds = 5;
  std::vector<BetaRule> store_rules = {BetaRule::kNone, BetaRule::kSu, BetaRule::kSsmax};
  std::vector<int64_t> store_lengths = {1, 4, 16, 32, 64, 128, 256};
  std::vector<int64_t> inspect_lengths = {1, 2, 4, 16, 64};
  std::vector<int64_t> fit_widths = {8, 16, 32, 64};
  int64_t fit_steps = 1000;
  int64_t facts_steps = 8000;
  static ReportConfig make(const std::string& out_dir, bool quick);
};

// Runs everything and writes out_dir/report.md last (atomically); returns its path. Runs found in
// out_dir/runs from an earlier call with the same sizes are reused.
std::string run_report(const ReportConfig& config);

// A Markdown table: the header row (first column left-aligned, the others right), then the rows,
// each as wide as the header. Shared by the report and the experiments.
std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows);

}  // namespace recall
