// Plots through gnuplot: data and script go to a private temporary folder, gnuplot renders into a
// temporary file beside the target, which is then renamed over it.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "recall/io.h"
#include "recall/probe_report.h"

namespace recall {

namespace fs = std::filesystem;

namespace {
// Distinct line colours, one per store (gnuplot's default cycle repeats after eight).
const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                          "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000080", "#808000"};
std::string colour(size_t i) {
  return fmt::format("rgb '{}'", kColours[i % 12]);
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "recall-plot-XXXXXX").string();
    if (!::mkdtemp(t.data()))
      throw std::runtime_error("cannot create a temporary folder for the plot");
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string terminal_for(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".png") return "pngcairo size 1600,640 font ',11'";
  if (ext == ".svg") return "svg size 1600,640 dynamic font ',11'";
  throw std::invalid_argument(fmt::format("--plot {}: the file must end in .png or .svg", path));
}
}  // namespace

void write_probe_plot(const ProbeResult& r, const std::string& path) {
  const std::string terminal = terminal_for(path);
  TempDir tmp;
  std::ofstream data(tmp.path / "data.txt");
  // One gnuplot data block per store and per rule: M  median  p10  p90  theory
  for (const auto& s : r.stores) {
    for (const auto& p : s.curve)
      data << p.M << ' ' << std::max(p.isr.median, 1e-12) << ' ' << std::max(p.isr.p10, 1e-12)
           << ' ' << std::max(p.isr.p90, 1e-12) << ' '
           << (p.theory_rms && *p.theory_rms > 0 ? fmt::format("{}", *p.theory_rms) : "NaN")
           << '\n';
    data << "\n\n";
  }
  for (const auto& rr : r.rules) {
    for (const auto& p : rr.curve)
      data << p.M << ' ' << p.isr.median << ' ' << p.isr.p10 << ' ' << p.isr.p90 << ' '
           << p.theory_rms << '\n';
    data << "\n\n";
  }
  data.close();
  const fs::path out =
      fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  const fs::path partial = out / ("." + fs::path(path).filename().string() + ".partial");
  std::string gp = fmt::format(
      "set terminal {} noenhanced\nset output '{}'\nset logscale xy\nset format x '1e%L'\n"
      "set format y '1e%L'\nset grid\nset key outside right\nset xlabel 'memories M'\n"
      "set ylabel 'interference-to-signal ratio'\n",
      terminal, partial.string());
  gp += r.rules.empty() ? "" : "set multiplot layout 1,2\n";
  gp +=
      fmt::format("set title 'ISR median against M, d_k = {} (theory rms dashed)'\nplot [][1e-3:] ",
                  r.config.d_k);
  const size_t n = r.stores.size();
  for (size_t i = 0; i < n; ++i)
    gp += fmt::format(
        "'{0}' index {1} using 1:2 with linespoints lc {2} pt 7 ps 0.6 title '{3}', "
        "'{0}' index {1} using 1:5 with lines dt 2 lc {2} notitle, ",
        (tmp.path / "data.txt").string(), i, colour(i), r.stores[i].store);
  gp += "1 with lines lc rgb 'black' lw 2 title 'ISR = 1'\n";
  if (!r.rules.empty()) {
    gp += fmt::format("set title 'softmax ISR by sharpness rule, L = {}, beta_0 = {}'\nplot ",
                      r.config.ref_len, r.config.beta);
    for (size_t i = 0; i < r.rules.size(); ++i)
      gp += fmt::format(
          "'{0}' index {1} using 1:2 with linespoints lc {2} pt 7 ps 0.6 title '{3}', "
          "'{0}' index {1} using 1:5 with lines dt 2 lc {2} notitle, ",
          (tmp.path / "data.txt").string(), n + i, colour(i), to_string(r.rules[i].rule));
    gp += "1 with lines lc rgb 'black' lw 2 title 'ISR = 1'\nunset multiplot\n";
  }
  std::ofstream(tmp.path / "plot.gp") << gp;
  const std::string cmd = fmt::format("gnuplot '{}' 2>'{}'", (tmp.path / "plot.gp").string(),
                                      (tmp.path / "err.txt").string());
  if (std::system(cmd.c_str()) != 0) {
    std::error_code ec;
    fs::remove(partial, ec);
    std::ifstream err(tmp.path / "err.txt");
    std::string first;
    std::getline(err, first);
    throw std::runtime_error(fmt::format("gnuplot failed writing {}: {}", path, first));
  }
  fs::rename(partial, path);
}

}  // namespace recall
