// Report section 1, theory: what it measures (experiment_theory.cpp) and its writer
// (experiment_theory_output.cpp).
#pragma once
#include "experiment.h"

namespace recall::experiment_detail {

// The capacity of each default store from the exact theory and from the Gaussian shortcut.
struct TheoryFound {
  int64_t d_k = 0;                              // key dimension
  double beta = 0;                              // the stores' sharpness
  std::vector<std::string> stores;              // default_store_names(), in their order
  std::vector<std::optional<double>> exact;     // per store: M where E[ISR^2] = 1, unit keys
  std::vector<std::optional<double>> gaussian;  // per store: the same, s ~ N(0, 1/d)
};
ExperimentResult write_theory(const Experiment& experiment, const TheoryFound& found);

}  // namespace recall::experiment_detail
