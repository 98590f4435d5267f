// Report section 3's files: extrapolate.json, extrapolate.png and the section (the accuracy per
// rule at each multiple, mean [min, max] over the runs that learned).
#include "experiment_mqar.h"

namespace recall::experiment_detail {

ExperimentResult write_mqar(const Experiment& experiment, const MqarFound& found) {
  const auto& points = found.points;
  write_file_atomic(experiment.path("extrapolate.json"), extrapolate_json(points));
  const std::vector<ExtrapolatePoint> learned = learned_points(points, found.failed);
  write_extrapolate_plot(learned, experiment.path("extrapolate.png"));
  std::string left_out;
  for (const auto& f : found.failed) {
    const auto a = std::find_if(points.begin(), points.end(), [&](const ExtrapolatePoint& p) {
      return p.checkpoint == f && p.multiple == 1;
    });
    left_out += fmt::format("{}`{}` ({:.3f})", left_out.empty() ? "" : ", ",
                            fs::relative(f, experiment.config().out_dir).string(), a->accuracy);
  }
  const auto curves = extrapolate_curves(learned);
  std::vector<std::string> header{"trained", "evaluated", "runs"};
  for (int64_t m : curves.front().multiples)
    header.push_back(fmt::format("{}x ({}, {} pairs)", m, m * 32,
                                 std::find_if(points.begin(), points.end(), [&](const auto& p) {
                                   return p.multiple == m;
                                 })->pairs));
  std::vector<std::vector<std::string>> rows;
  for (const auto& cv : curves) {
    std::vector<std::string> row{"`" + to_string(cv.trained) + "`", "`" + to_string(cv.rule) + "`",
                                 std::to_string(cv.runs)};
    for (size_t i = 0; i < cv.accuracy.size(); ++i)
      row.push_back(cv.runs > 1 ? fmt::format("{:.3f} [{:.2f}, {:.2f}]", cv.accuracy[i], cv.low[i],
                                              cv.high[i])
                                : fmt::format("{:.3f}", cv.accuracy[i]));
    rows.push_back(row);
  }
  const ExtrapolateConfig& extrapolation = found.extrapolation;
  ExperimentResult out;
  out.title = "Trained attention at longer contexts";
  out.json = "extrapolate.json";
  out.plot = "extrapolate.png";
  out.markdown = fmt::format(
      "`recall extrapolate --config mqar-extrapolate --set steps={} --seeds {} --lengths {} "
      "--pairs grow`: mqar-extrapolate (8 pairs in 32 tokens, 255 keys, 2 layers x 4 heads, no "
      "positions, a width-2 convolution of q, k, v, no MLP) trained once per rule and seed, "
      "then scored at 1x to {}x its length ({} x 64 prompts at 1x; with the pairs grown g times, "
      "1/g of them, 4 at least: as many scored queries at every length) with the pairs growing "
      "with the length, so that a longer context holds more memories. Mean accuracy over the "
      "runs that learned, [min, max] when there are several. Rows where training and "
      "evaluation differ are runs trained with `none`, for which qwen and yarn are the identity "
      "up to L.\n\n{}\n"
      "Runs left out, not having learned at 1x (accuracy): {}.\n\n"
      "![extrapolate](extrapolate.png)\n",
      found.steps, found.seeds, fmt::join(extrapolation.lengths, ","), extrapolation.lengths.back(),
      extrapolation.batches, markdown_table(header, rows), left_out.empty() ? "none" : left_out);
  return out;
}

}  // namespace recall::experiment_detail
