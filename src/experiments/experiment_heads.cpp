// Report section 4: the heads of section 3's first run trained without a rule that learned: which
// recall, and their ISR as the context grows (recall inspect).
#include "experiment_heads.h"

#include "experiment_mqar.h"
#include "recall/analysis/extrapolate.h"

namespace recall::experiment_detail {

HeadsFound Experiment::heads() {
  const ExperimentSizes& size = sizes();
  // section 3's points (its runs' accuracy), made first where they are not in --out
  if (!fs::exists(path("extrapolate.json"))) write_mqar(*this, mqar());
  const std::string file = path("extrapolate.json");
  const auto points = read_extrapolate_json(read_file("--out", file), file);
  HeadsFound found;
  found.run = first_learned_run(points, BetaRule::kNone);
  if (found.run.empty())
    throw std::runtime_error(
        "report: no mqar-extrapolate run trained with rule none learned to recall");
  Restored r = restore(found.run);
  found.inspection.lengths = size.inspect_lengths;
  // ssmax at evaluation of a model trained without it starts at its initial scale: su again
  found.inspection.rules = {BetaRule::kNone, BetaRule::kSu, BetaRule::kQwen, BetaRule::kYarn};
  found.inspection.batches = size.extrapolate_batches;
  found.inspection.pairs = PairsAtLength::kGrow;
  found.result = inspect(r, found.inspection, found.run);
  return found;
}

}  // namespace recall::experiment_detail
