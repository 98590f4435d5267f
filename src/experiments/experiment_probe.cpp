// Report section 2: the probe's measured capacities beside theory, and the softmax ISR under each
// sharpness rule (recall probe).
#include "experiment_probe.h"

namespace recall::experiment_detail {

ProbeFound Experiment::probe() {
  const ExperimentSizes& size = sizes();
  ProbeFound found;
  found.trials = size.probe_trials;
  found.rule_m_max = size.probe_rule_m_max;
  ProbeConfig probing;
  probing.trials = found.trials;
  probing.rule_m_max = found.rule_m_max;
  found.result = run_probe(probing);
  return found;
}

}  // namespace recall::experiment_detail
