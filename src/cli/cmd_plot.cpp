// recall plot: training curves of one or several runs (their metrics.jsonl): training loss, eval
// accuracy and learning rate against step, one colour per run, the legend by run name. A folder
// holding runs (a sweep's) stands for all of them.
#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "commands.h"
#include "output.h"
#include "recall/core/error.h"
#include "recall/formats/plot.h"
#include "recall/train/metrics.h"

namespace recall::cli {
namespace fs = std::filesystem;

namespace {

struct Curves {
  std::string name;
  std::vector<std::array<double, 3>> train;  // step, loss, lr
  std::vector<std::array<double, 2>> eval;   // step, accuracy
};

Curves read_curves(const fs::path& run, const std::string& name) {
  Curves c{name, {}, {}};
  for (const auto& r : read_metrics(run.string())) {
    const auto loss = r.get("loss"), lr = r.get("lr"), accuracy = r.get("accuracy");
    const auto step = static_cast<double>(r.step);
    if (!r.eval && loss && lr) c.train.push_back({step, *loss, *lr});
    if (r.eval && accuracy) c.eval.push_back({step, *accuracy});
  }
  return c;
}

// The runs named on the command line: a folder with metrics.jsonl, or a folder of such folders.
std::vector<std::pair<fs::path, std::string>> find_runs(const std::vector<std::string>& args) {
  std::vector<std::pair<fs::path, std::string>> runs;
  for (const auto& arg : args) {
    const fs::path p(arg);
    if (fs::exists(metrics_path(p.string()))) {
      runs.emplace_back(p, p.lexically_normal().filename().string().empty()
                               ? p.lexically_normal().parent_path().filename().string()
                               : p.lexically_normal().filename().string());
      continue;
    }
    std::set<fs::path> inside;
    std::error_code ec;
    if (fs::is_directory(p, ec))
      for (const auto& e : fs::directory_iterator(p, ec))
        if (fs::exists(metrics_path(e.path().string()))) inside.insert(e.path());
    if (inside.empty())
      throw UsageError(fmt::format(
          "{}: no metrics.jsonl there nor in its folders; give a run folder (recall train --out)",
          arg));
    for (const auto& r : inside) runs.emplace_back(r, r.filename().string());
  }
  std::map<std::string, int> seen;
  for (const auto& r : runs) ++seen[r.second];
  for (auto& r : runs)  // two runs of one name: their paths tell them apart
    if (seen[r.second] > 1) r.second = r.first.string();
  return runs;
}

std::string quoted(const std::string& s) {  // a gnuplot single-quoted string
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

void write_curves_plot(const std::vector<Curves>& runs, const std::string& path) {
  std::string data;
  for (const auto& r : runs) {  // blocks 2i: step loss lr; 2i + 1: step accuracy
    data += "# " + r.name + ": step loss lr\n";
    for (const auto& [s, l, lr] : r.train) data += fmt::format("{} {:.9g} {:.9g}\n", s, l, lr);
    data += "\n\n# " + r.name + ": step accuracy\n";
    for (const auto& [s, a] : r.eval) data += fmt::format("{} {:.9g}\n", s, a);
    data += "\n\n";
  }
  render_plot(
      path, data,
      [&](const std::string& file) {
        auto panel = [&](int column, int block, bool eval, const char* style) {
          std::string items;
          for (size_t i = 0; i < runs.size(); ++i) {
            if ((eval ? runs[i].eval.empty() : runs[i].train.empty())) continue;
            items +=
                fmt::format("{}{} index {} using 1:{} with {} lc {} {}", items.empty() ? "" : ", ",
                            quoted(file), 2 * i + block, column, style, plot_colour(i),
                            eval || column == 3 ? "notitle" : "title " + quoted(runs[i].name));
          }
          // no points at all: an empty panel rather than gnuplot's error (an undrawn line at 1,
          // which the loss panel's log scale can hold)
          return items.empty() ? std::string(
                                     "set label 'no data' at graph 0.5,0.5 center\n"
                                     "plot [0:1] 1 notitle lt nodraw\nunset label\n")
                               : "plot " + items + "\n";
        };
        return "set multiplot layout 1,3\nset xlabel 'step'\nset xrange [0:*]\nset grid\nset key "
               "top right\n"
               "set title 'training loss'\nset logscale y\n" +
               panel(2, 0, false, "lines lw 1.5") +
               "unset logscale y\nset title 'eval accuracy'\nset yrange [0:1.02]\n" +
               panel(2, 1, true, "linespoints lw 1.5 pt 7 ps 0.5") +
               "set autoscale y\nset title 'learning rate'\nset format y '%.1e'\n" +
               panel(3, 0, false, "lines lw 1.5") + "unset multiplot\n";
      },
      1800, 560);
}

}  // namespace

void add_plot(CLI::App& root, Action& action) {
  struct Args {
    std::vector<std::string> runs;
    std::string out;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = root.add_subcommand(
      "plot", "training curves of runs: loss, eval accuracy and learning rate against step");
  cmd->add_option("runs", args->runs, "run folders (metrics.jsonl), or folders of runs (a sweep)")
      ->required();
  cmd->add_option("--out", args->out, "the plot file (.png or .svg)")->required();
  cmd->callback([args, &action] {
    check_plot_path("--out", args->out);
    action = [args] {
      std::vector<Curves> curves;
      for (const auto& [path, name] : find_runs(args->runs))
        curves.push_back(read_curves(path, name));
      write_curves_plot(curves, args->out);
      if (!quiet())
        fmt::print(stderr, "plotted {} run{} to {}\n", curves.size(), curves.size() == 1 ? "" : "s",
                   args->out);
      return 0;
    };
  });
}

}  // namespace recall::cli
