// Report section 4's files: inspect.json, inspect.png and the section (the inspect table of the
// rule-less run's heads).
#include "experiment_heads.h"

namespace recall::experiment_detail {

ExperimentResult write_heads(const Experiment& experiment, const HeadsFound& found) {
  write_file_atomic(experiment.path("inspect.json"), inspect_json(found.result));
  write_inspect_plot(found.result, experiment.path("inspect.png"));
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
      fs::relative(found.run, experiment.config().out_dir).string(),
      fmt::join(found.inspection.lengths, ","), inspect_table(found.result));
  return out;
}

}  // namespace recall::experiment_detail
