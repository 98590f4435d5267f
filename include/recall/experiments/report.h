// recall report: the essay's reproduction and the trained-model experiments at toy size, in one
// Markdown report with PNG plots: every row of experiment_rows() (recall/experiments/
// experiments.h) in order, one section each: the theory and the probe of random stores, mqar
// trained under each rule and its heads, trained against written stores, facts, then sharpness,
// scaling laws, facts to saturation per feed-forward kind, learned key-values on language, and
// length extrapolation with and without positions and in the essay's store. Each row states its
// sizes, quick or not (ExperimentSizes).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "recall/train/trainer.h"

namespace recall {

struct ReportConfig {
  std::string out_dir;  // report.md, plots and JSON; training runs under out_dir/runs
  bool quick = false;   // every row's quick sizes
  // How every run trains (a line per step on stderr with progress). The stop callback is also
  // polled between sections: non-zero stops the report (training runs after a checkpoint) with
  // StopRequested (recall/core/signals.h); the same call resumes.
  RunContext run;
};

// Runs everything and writes out_dir/report.md last (atomically); returns its path. Runs found in
// out_dir/runs from an earlier call with the same sizes are reused.
std::string run_report(const ReportConfig& config);

// A Markdown table: the header row (first column left-aligned, the others right), then the rows,
// each as wide as the header. Shared by the report and the experiments.
std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows);

}  // namespace recall
