// Report section 4, heads: what it measures (experiment_heads.cpp) and its writer
// (experiment_heads_output.cpp).
#pragma once
#include "experiment.h"
#include "recall/analysis/inspect.h"

namespace recall::experiment_detail {

// The heads of mqar's first rule-less run that learned, inspected at each length and rule.
struct HeadsFound {
  std::string run;           // that run's folder (under --out)
  InspectConfig inspection;  // the lengths, rules, batches and pairs it was inspected at
  InspectResult result;      // each head's reads, ISR and ablated accuracy
};
ExperimentResult write_heads(const Experiment& experiment, const HeadsFound& found);

}  // namespace recall::experiment_detail
