// `recall experiment` sharpness's files: beta_sweep.json, beta_sweep.png and the section (per
// attn_scale, the accuracy, the steps to 99 % and the attention logits' gradient and entropy).
#include <fmt/format.h>

#include <sstream>

#include "experiment_sharpness.h"
#include "recall/formats/plot.h"

namespace recall::experiment_detail {

using nlohmann::json;

namespace {

std::string sharpness_plot_script(const std::string& f) {
  return fmt::format(
      "set multiplot layout 1,3\nset logscale x 2\nset grid\nset xlabel 'attn scale'\n"
      "set key bottom left\n"
      "set title 'final accuracy (points: seeds)'\nset yrange [0:1.02]\n"
      "plot '{0}' index 0 using 1:3 with points pt 7 lc {1} notitle, "
      "'{0}' index 1 using 1:2 with lines lc {1} title 'mean'\n"
      "set title 'steps to 99 % (missing: never)'\nset autoscale y\n"
      "plot '{0}' index 0 using 1:4 with points pt 7 lc {2} notitle\n"
      "set title 'attention logits: init and trained'\nset logscale y\nset ylabel 'gradient "
      "norm'\n"
      "set y2label 'entropy (nats)'\nset y2tics\nset key bottom left\n"
      "plot '{0}' index 1 using 1:3 with linespoints pt 7 lc {3} title 'grad norm (init)', "
      "'{0}' index 1 using 1:5 with linespoints pt 6 dt 2 lc {3} title 'grad norm "
      "(trained)', '{0}' index 1 using 1:4 axes x1y2 with linespoints pt 7 lc {4} title "
      "'entropy (init)', '{0}' index 1 using 1:7 axes x1y2 with lines dt 3 lc {4} title "
      "'uniform'\nunset multiplot\n",
      f, plot_colour(0), plot_colour(1), plot_colour(2), plot_colour(3));
}

}  // namespace

ExperimentResult write_sharpness(const Experiment& experiment, const SharpnessFound& found) {
  const int64_t seeds = found.seeds, steps = found.steps;
  json points = json::array();
  std::ostringstream data;  // index 0: one row per run; index 1: the means per scale
  std::vector<std::vector<std::string>> rows;
  std::ostringstream means;
  for (size_t i = 0; i < found.scales.size(); ++i) {
    const double scale = found.scales[i];
    std::vector<double> acc, gi, ei, gf, ef;
    std::vector<std::string> s99;
    double uniform = 0;
    for (int64_t seed = 0; seed < seeds; ++seed) {
      const SharpnessRun& r = found.runs[i][static_cast<size_t>(seed)];
      const auto& to99 = r.steps_to_99;
      points.push_back({{"attn_scale", scale},
                        {"seed", seed},
                        {"accuracy", r.accuracy},
                        {"steps_to_99", json_or_null(to99)},
                        {"grad_norm_init", r.init.grad_norm},
                        {"entropy_init", r.init.entropy},
                        {"grad_norm_final", r.trained.grad_norm},
                        {"entropy_final", r.trained.entropy},
                        {"entropy_uniform", r.init.uniform_entropy},
                        {"steps", steps}});
      data << scale << ' ' << seed << ' ' << r.accuracy << ' '
           << (to99 ? std::to_string(*to99) : std::string("NaN")) << ' ' << r.init.grad_norm << ' '
           << r.init.entropy << ' ' << r.trained.grad_norm << ' ' << r.trained.entropy << '\n';
      acc.push_back(r.accuracy);
      gi.push_back(r.init.grad_norm);
      ei.push_back(r.init.entropy);
      gf.push_back(r.trained.grad_norm);
      ef.push_back(r.trained.entropy);
      s99.push_back(to99 ? std::to_string(*to99) : "never");
      uniform = r.init.uniform_entropy;
    }
    means << scale << ' ' << mean(acc) << ' ' << mean(gi) << ' ' << mean(ei) << ' ' << mean(gf)
          << ' ' << mean(ef) << ' ' << uniform << '\n';
    rows.push_back({fmt::format("{}", scale), mean_range(acc, "{:.3f}"),
                    fmt::format("{}", fmt::join(s99, ", ")), fmt::format("{:.3g}", mean(gi)),
                    fmt::format("{:.3f} ({:.3f})", mean(ei), uniform),
                    fmt::format("{:.3g}", mean(gf)), fmt::format("{:.3f}", mean(ef))});
  }
  experiment.write_json(
      "beta_sweep.json",
      {{"config", "mqar-tiny"}, {"steps", steps}, {"seeds", seeds}, {"points", points}});
  data << "\n\n" << means.str();
  render_plot(experiment.path("beta_sweep.png"), data.str(), sharpness_plot_script, 1600, 520);
  const std::string markdown = fmt::format(
      "`recall experiment sharpness{}`: mqar-tiny ({} steps, {} seed(s) per point) with its "
      "attention logits multiplied by `attn_scale` (1 = the standard 1 / sqrt(d_head)). The "
      "gradient norm is || dL/dz || over every attention logit z of a training batch, the "
      "entropy the mean softmax entropy per query (uniform attention in brackets), at "
      "initialisation and after training.\n\n{}\n![sharpness](beta_sweep.png)\n",
      experiment.config().quick ? " --quick" : "", steps, seeds,
      markdown_table({"attn_scale", "accuracy", "steps to 99 %", "grad norm init", "entropy init",
                      "grad norm trained", "entropy trained"},
                     rows));
  return {"Sharpness in trained attention", "beta_sweep.json", "beta_sweep.png", markdown};
}

}  // namespace recall::experiment_detail
