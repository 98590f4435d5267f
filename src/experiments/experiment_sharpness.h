// Report section 7, sharpness: what it measures (experiment_sharpness.cpp) and its writer
// (experiment_sharpness_output.cpp).
#pragma once
#include "experiment.h"
#include "recall/analysis/attention_stats.h"

namespace recall::experiment_detail {

// One mqar-tiny run at one attention scale and seed, measured before and after training.
struct SharpnessRun {
  double accuracy = 0;
  std::optional<int64_t> steps_to_99;
  AttentionStats init, trained;
};

// mqar-tiny trained at each attn_scale and seed.
struct SharpnessFound {
  int64_t steps = 0, seeds = 0;                 // per run, and per scale
  std::vector<double> scales;                   // the attn_scale values swept, in order
  std::vector<std::vector<SharpnessRun>> runs;  // per scale, one per seed
};
ExperimentResult write_sharpness(const Experiment& experiment, const SharpnessFound& found);

}  // namespace recall::experiment_detail
