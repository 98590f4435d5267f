// Report section 5's files: fit.json, fit.png and the section (per kind and width: the memories a
// trained store recalls against the constructed store's).
#include <sstream>

#include "experiment_fit.h"
#include "recall/formats/plot.h"

namespace recall::experiment_detail {

namespace {

void write_fit_plot(const std::vector<FitResult>& results, const std::string& file) {
  std::ostringstream data;  // one block per kind: width  fitted  constructed  parameters
  std::vector<std::string> kinds;
  std::vector<double> widths;
  for (const auto& r : results) widths.push_back(static_cast<double>(r.config.width));
  std::sort(widths.begin(), widths.end());
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (i > 0 && results[i - 1].config.kind != r.config.kind) data << "\n\n";
    if (kinds.empty() || kinds.back() != to_string(r.config.kind))
      kinds.push_back(to_string(r.config.kind));
    data << r.config.width << ' ' << std::max<int64_t>(r.capacity, 1) << ' '
         << r.constructed.value_or(0.0) << ' ' << r.parameters << '\n';
  }
  render_plot(
      file, data.str(),
      [&](const std::string& f) {
        std::string gp =
            "set logscale xy 2\nset grid\nset key outside right\nset xlabel 'width N'\n"
            "set ylabel 'memories recalled at 99 %'\nset title 'trained (solid) against "
            "constructed (dashed) stores, d_k = 32'\n";
        gp += fmt::format("set xrange [{}:{}]\nplot ", widths.front() / 1.5, widths.back() * 1.5);
        for (size_t i = 0; i < kinds.size(); ++i)
          gp += fmt::format(
              "'{0}' index {1} using 1:2 with linespoints lc {2} pt 7 title '{3}', "
              "'{0}' index {1} using 1:3 with linespoints dt 2 lc {2} pt 6 notitle{4}",
              f, i, plot_colour(i), kinds[i], i + 1 < kinds.size() ? ", " : "\n");
        return gp;
      },
      1100, 640);
}

}  // namespace

ExperimentResult write_fit(const Experiment& experiment, const FitFound& found) {
  std::vector<std::vector<std::string>> rows;
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < found.results.size(); ++i) {
    const FitResult& r = found.results[i];
    all.push_back(nlohmann::json::parse(fit_json(r)));
    rows.push_back(
        {fmt::format("`{}`", found.kinds[i]), std::to_string(r.config.width),
         std::to_string(r.parameters), fmt::format("{}{}", r.capacity, r.capped ? "+" : ""),
         fmt::format("{:.3f}", r.bits_per_param),
         fmt::format("{:.4g}", r.constructed.value_or(0.0)), opt_num(r.theory),
         fmt::format("{:.2f}", r.capacity / std::max(r.constructed.value_or(0.0), 1.0))});
  }
  experiment.write_json("fit.json", all);
  write_fit_plot(found.results, experiment.path("fit.png"));
  ExperimentResult out;
  out.title = "Trained stores against constructed ones";
  out.json = "fit.json";
  out.plot = "fit.png";
  out.markdown = fmt::format(
      "`recall fit --kind K --width N --steps {}`: a store of width N trained by full-batch "
      "Adam on M random unit keys -> values (d_k = d_v = 32); fitted M is the largest M with "
      ">= 99 % recalled (nearest value among M), found by bisection. Constructed: N memories "
      "written as keys and values, min(N, random-key theory). Bits per parameter count "
      "M log2 M.\n\n{}\n![fit](fit.png)\n",
      found.steps,
      markdown_table({"kind", "width N", "parameters", "fitted M", "bits / param", "constructed",
                      "random-key theory", "fitted / constructed"},
                     rows));
  return out;
}

}  // namespace recall::experiment_detail
