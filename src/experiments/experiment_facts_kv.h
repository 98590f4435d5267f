// Report section 6, facts-kv: what it measures (experiment_facts_kv.cpp) and its writer
// (experiment_facts_kv_output.cpp).
#pragma once
#include <map>

#include "experiment.h"
#include "recall/analysis/inspect.h"

namespace recall::experiment_detail {

// facts-tiny trained with an MLP and with learned key-values, each then read as a store.
struct FactsKvFound {
  // One trained run.
  struct Run {
    std::string ffn;                     // "mlp" or "learned_kv"
    int64_t parameters = 0;              // the model's
    std::map<std::string, double> eval;  // its last evaluation (accuracy, bits, bits_per_param)
    InspectResult inspection;            // its feed-forward layer read as a store
  };
  int64_t steps = 0;      // per run
  std::vector<Run> runs;  // mlp, then learned_kv
};
ExperimentResult write_facts_kv(const Experiment& experiment, const FactsKvFound& found);

}  // namespace recall::experiment_detail
