// Report section 3, mqar: what it measures (experiment_mqar.cpp) and its writer
// (experiment_mqar_output.cpp).
#pragma once
#include "experiment.h"
#include "recall/analysis/extrapolate.h"

namespace recall::experiment_detail {

// mqar-extrapolate trained under each rule and scored at 1x to 64x its length, pairs growing.
struct MqarFound {
  int64_t steps = 0, seeds = 0;  // per run, and per rule
  ExtrapolateConfig extrapolation;
  std::vector<ExtrapolatePoint> points;  // every run's, at every multiple and rule read
  std::vector<std::string> failed;       // the runs that did not learn (accuracy < 0.9 at 1x)
};
ExperimentResult write_mqar(const Experiment& experiment, const MqarFound& found);

}  // namespace recall::experiment_detail
