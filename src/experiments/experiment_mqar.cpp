// Report section 3: mqar-extrapolate trained under each sharpness rule and scored at 1x to 64x its
// length with the pairs growing with the length (recall extrapolate). Section 4 reads its runs.
#include "experiment_mqar.h"

namespace recall::experiment_detail {

MqarFound Experiment::mqar() {
  const ExperimentSizes& size = sizes();
  MqarFound found;
  found.steps = steps(size.mqar_steps);
  found.seeds = size.mqar_seeds;
  // the runs of the extrapolation experiment (section 11), which reads them again
  const ExtrapolateRuns runs =
      extrapolation_runs(run_dir(""), "mqar-extrapolate", "", {}, found.steps, found.seeds,
                         size.mqar_rules, context());
  found.extrapolation.lengths = size.extrapolate_lengths;
  found.extrapolation.pairs = PairsAtLength::kGrow;
  found.extrapolation.none_also = rules_equal_to_none_within_training_length();
  found.extrapolation.batches = size.extrapolate_batches;
  found.extrapolation.device = context().device;
  found.points = train_and_extrapolate(runs, found.extrapolation);
  // the means are over the runs that learned (accuracy >= 0.9 at 1x under their own rule)
  found.failed = unlearned_runs(found.points);
  if (first_learned_run(found.points, BetaRule::kNone).empty())
    throw std::runtime_error(
        "report: no mqar-extrapolate run trained with rule none learned to recall");
  return found;
}

}  // namespace recall::experiment_detail
