// Report section 5, fit: what it measures (experiment_fit.cpp) and its writer
// (experiment_fit_output.cpp).
#pragma once
#include "experiment.h"
#include "recall/analysis/fit.h"

namespace recall::experiment_detail {

// Stores of each kind and width trained on random memories, beside the same width constructed.
struct FitFound {
  int64_t steps = 0;               // per fit
  std::vector<std::string> kinds;  // each result's kind, as `recall fit --kind` names it
  std::vector<FitResult> results;  // per kind, then per width
};
ExperimentResult write_fit(const Experiment& experiment, const FitFound& found);

}  // namespace recall::experiment_detail
