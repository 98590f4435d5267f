// The probe's plot: ISR against M for every store and every sharpness rule.
#include <fmt/format.h>

#include <sstream>

#include "recall/analysis/probe_output.h"
#include "recall/formats/plot.h"

namespace recall {

void write_probe_plot(const ProbeResult& r, const std::string& path) {
  std::ostringstream data;
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
  render_plot(path, data.str(), [&](const std::string& file) {
    std::string gp =
        "set logscale xy\nset format x '1e%L'\nset format y '1e%L'\nset grid\n"
        "set key outside right\nset xlabel 'memories M'\n"
        "set ylabel 'interference-to-signal ratio'\n";
    gp += r.rules.empty() ? "" : "set multiplot layout 1,2\n";
    gp += fmt::format(
        "set title 'ISR median against M, d_k = {} (theory rms dashed)'\nplot [][1e-3:] ",
        r.config.d_k);
    const size_t n = r.stores.size();
    for (size_t i = 0; i < n; ++i)
      gp += fmt::format(
          "'{0}' index {1} using 1:2 with linespoints lc {2} pt 7 ps 0.6 title '{3}', "
          "'{0}' index {1} using 1:5 with lines dt 2 lc {2} notitle, ",
          file, i, plot_colour(i), r.stores[i].store);
    gp += "1 with lines lc rgb 'black' lw 2 title 'ISR = 1'\n";
    if (!r.rules.empty()) {
      gp += fmt::format("set title 'softmax ISR by sharpness rule, L = {}, beta_0 = {}'\nplot ",
                        r.config.ref_len, r.config.beta);
      for (size_t i = 0; i < r.rules.size(); ++i)
        gp += fmt::format(
            "'{0}' index {1} using 1:2 with linespoints lc {2} pt 7 ps 0.6 title '{3}', "
            "'{0}' index {1} using 1:5 with lines dt 2 lc {2} notitle, ",
            file, n + i, plot_colour(i), to_string(r.rules[i].rule));
      gp += "1 with lines lc rgb 'black' lw 2 title 'ISR = 1'\nunset multiplot\n";
    }
    return gp;
  });
}

}  // namespace recall
