#include "recall/experiments/report.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "recall/core/io.h"
#include "recall/core/machine.h"
#include "recall/core/signals.h"
#include "recall/experiments/experiments.h"

namespace recall {

namespace fs = std::filesystem;

std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows) {
  std::string out = "| " + fmt::format("{}", fmt::join(header, " | ")) + " |\n|";
  for (size_t i = 0; i < header.size(); ++i) out += i == 0 ? "---|" : "---:|";
  out += "\n";
  for (const auto& r : rows) out += "| " + fmt::format("{}", fmt::join(r, " | ")) + " |\n";
  return out;
}

std::string run_report(const ReportConfig& config) {
  make_output_dir("--out", config.out_dir);
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const double gemm = measure_gemm_gflops(3, 1);
  // every experiment, into this folder: a later one reads an earlier one's runs and files (heads
  // reads mqar's, extrapolation retrains none of mqar's runs)
  const auto& rows = experiment_rows();
  std::vector<std::string> sections;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (config.run.stop)
      if (int s = config.run.stop(0)) throw StopRequested(s, "before " + rows[i].name);
    if (config.run.progress)
      fmt::print(stderr, "report [{}/{}] {}: {} ({:.0f} s so far)\n", i + 1, rows.size(),
                 rows[i].name, rows[i].claim, elapsed());
    ExperimentConfig experiment;
    experiment.name = rows[i].name;
    experiment.out_dir = config.out_dir;
    experiment.quick = config.quick;
    experiment.run = config.run;
    const ExperimentResult r = rows[i].run(experiment);
    sections.push_back(fmt::format("## {}. {}\n\n{}", i + 1, r.title, r.markdown));
  }
  std::string md = fmt::format(
      "# recall report{}\n\n"
      "The essay's capacity experiments reproduced on random stores, then its claims put to "
      "trained models at toy size. Made by `recall report --out {}{}` in {:.1f} minutes on "
      "{} threads (fp32 GEMM {:.0f} GFLOP/s on this machine); every number below is in the "
      "JSON files beside this one, and each section names the command that makes it alone.\n\n",
      config.quick ? " (quick)" : "", config.out_dir, config.quick ? " --quick" : "",
      elapsed() / 60.0, at::get_num_threads(), gemm);
  if (config.quick)
    md +=
        "Quick mode: fewer trials, steps and widths than the default; the trends are there, the "
        "figures are rough.\n\n";
  md += fmt::format("{}", fmt::join(sections, "\n"));
  const std::string out = (fs::path(config.out_dir) / "report.md").string();
  write_file_atomic(out, md);
  return out;
}

}  // namespace recall
