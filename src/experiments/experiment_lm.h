// Report section 10, lm: what it measures (experiment_lm.cpp) and its writer
// (experiment_lm_output.cpp).
#pragma once
#include "experiment.h"

namespace recall::experiment_detail {

// One text-tiny run of a feed-forward kind at one seed.
struct LmRun {
  int64_t params = 0;        // the model's parameters
  double bits_per_char = 0;  // on validation, after training
  double tokens_per_s = 0;   // the training throughput it logged last (0: none)
};

// A 2-layer d = 64 model trained on text-tiny per feed-forward kind and seed.
struct LmFound {
  int64_t steps = 0, seeds = 0;          // per run, and per kind
  std::vector<FfnVariant> variants;      // the kinds, each at 12 d^2 parameters, in order
  std::vector<std::vector<LmRun>> runs;  // per kind, one per seed
};
ExperimentResult write_lm(const Experiment& experiment, const LmFound& found);

}  // namespace recall::experiment_detail
