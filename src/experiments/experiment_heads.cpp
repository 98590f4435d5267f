// Report section 4: the heads of section 3's first run trained without a rule that learned: which
// recall, and their ISR as the context grows (recall inspect).
#include "experiment_mqar.h"
#include "recall/analysis/extrapolate.h"
#include "recall/analysis/inspect.h"

namespace recall::experiment_detail {

ExperimentResult Experiment::heads() {
  const ExperimentSizes& size = sizes();
  // section 3's points (its runs' accuracy), made first where they are not in --out
  if (!fs::exists(path("extrapolate.json"))) write_mqar(*this, mqar());
  const std::string file = path("extrapolate.json");
  const auto points = read_extrapolate_json(read_file("--out", file), file);
  const std::string none_run = first_learned_run(points, BetaRule::kNone);
  if (none_run.empty())
    throw std::runtime_error(
        "report: no mqar-extrapolate run trained with rule none learned to recall");
  Restored r = restore(none_run);
  InspectConfig inspection;
  inspection.lengths = size.inspect_lengths;
  // ssmax at evaluation of a model trained without it starts at its initial scale: su again
  inspection.rules = {BetaRule::kNone, BetaRule::kSu, BetaRule::kQwen, BetaRule::kYarn};
  inspection.batches = size.extrapolate_batches;
  inspection.pairs = PairsAtLength::kGrow;
  const InspectResult result = inspect(r, inspection, none_run);
  write_file_atomic(path("inspect.json"), inspect_json(result));
  write_inspect_plot(result, path("inspect.png"));
  ExperimentResult out;
  out.title = "Which heads recall";
  out.json = "inspect.json";
  out.plot = "inspect.png";
  out.markdown = fmt::format(
      "`recall inspect --checkpoint {} --lengths {} --pairs grow` (paths relative to this "
      "folder). For a query whose key sits at 2i, a head reads position 2i + o of the pair "
      "(key, value, or the next key's position, where a first-layer head gathers both); "
      "ablated is the accuracy with the head's output zeroed.\n\n```\n{}```\n\n"
      "![inspect](inspect.png)\n",
      fs::relative(none_run, config_.out_dir).string(), fmt::join(inspection.lengths, ","),
      inspect_table(result));
  return out;
}

}  // namespace recall::experiment_detail
