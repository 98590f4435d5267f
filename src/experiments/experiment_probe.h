// Report section 2, probe: what it measures (experiment_probe.cpp) and its writer
// (experiment_probe_output.cpp).
#pragma once
#include "experiment.h"
#include "recall/analysis/probe.h"

namespace recall::experiment_detail {

// The probe's ISR against M per store and per sharpness rule, and the capacities it crosses at.
struct ProbeFound {
  ProbeResult result;  // every store's and rule's curve, its config and the run's seconds
};
ExperimentResult write_probe(const Experiment& experiment, const ProbeFound& found);

}  // namespace recall::experiment_detail
