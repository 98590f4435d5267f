// Report section 8, scaling: what it measures (experiment_scaling.cpp) and its writer
// (experiment_scaling_output.cpp).
#pragma once
#include "experiment.h"
#include "recall/analysis/probe.h"

namespace recall::experiment_detail {

// A store at one value of the variable swept: its capacity from theory, and from the probe where
// theory is within the plan's limit.
struct CapacityPoint {
  std::string store, variable;
  double value;
  int64_t d;
  double beta;
  std::optional<double> theory, probe;
};

// The capacities from theory and the probe against d_k, the relu power, the exp terms and the
// softmax beta, and the per-M ISR of the outer-product and least-squares stores.
struct ScalingFound {
  int64_t trials = 0, queries = 0;    // the probe's, at every point
  double probe_limit = 0;             // largest theory capacity probed
  std::vector<int64_t> dims;          // the d_k swept
  std::vector<CapacityPoint> points;  // every store at every value of its variable
  ProbeConfig isr_probing;            // the per-M ISR's probe: outer product and least squares
  ProbeResult isr;                    // its result
};
ExperimentResult write_scaling(const Experiment& experiment, const ScalingFound& found);

}  // namespace recall::experiment_detail
