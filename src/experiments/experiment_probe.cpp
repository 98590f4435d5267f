// Report section 2: the probe's measured capacities beside theory, and the softmax ISR under each
// sharpness rule (recall probe).
#include "experiment_probe.h"

namespace recall::experiment_detail {

ProbeFound Experiment::probe() {
  const ExperimentSizes& size = sizes();
  ProbeConfig probing;
  probing.trials = size.probe_trials;
  probing.rule_m_max = size.probe_rule_m_max;
  return {run_probe(probing)};
}

}  // namespace recall::experiment_detail
