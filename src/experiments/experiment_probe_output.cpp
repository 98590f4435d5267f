// Report section 2's files: probe.json, probe.png and the section (each store's capacity crossings
// beside theory, and the softmax ISR under each rule at M = L, 16 L, 256 L, ...).
#include "experiment_probe.h"
#include "recall/analysis/probe_output.h"

namespace recall::experiment_detail {

ExperimentResult write_probe(const Experiment& experiment, const ProbeFound& found) {
  const ProbeResult& r = found.result;
  write_file_atomic(experiment.path("probe.json"), probe_json(r));
  write_probe_plot(r, experiment.path("probe.png"));
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : r.stores) {
    const auto& k = s.capacity;
    rows.push_back({"`" + s.store + "`", opt_num(k.median),
                    k.low && k.high ? fmt::format("[{:.4g}, {:.4g}]", *k.low, *k.high) : "—",
                    k.rms ? fmt::format("{:.4g} ± {:.2g}", *k.rms, k.rms_sem.value_or(0.0)) : "—",
                    opt_num(k.theory),
                    k.rms && k.theory ? fmt::format("{:.3f}", *k.rms / *k.theory) : "—"});
  }
  // the rules' curves at M = L, 16 L, 256 L, ... and the last point
  std::vector<std::string> rules_header{"rule"};
  std::vector<std::vector<std::string>> rules_rows;
  std::vector<size_t> cols;
  if (!r.rules.empty()) {
    const auto& curve = r.rules.front().curve;
    for (size_t i = 0; i < curve.size(); ++i)
      if (i % 4 == 0 || i + 1 == curve.size()) {
        cols.push_back(i);
        rules_header.push_back(fmt::format("M = {}", curve[i].M));
      }
    for (const auto& rr : r.rules) {
      std::vector<std::string> row{"`" + to_string(rr.rule) + "`"};
      for (size_t i : cols)
        row.push_back(
            fmt::format("{:.3g} ({:.3g})", rr.curve[i].isr.median, rr.curve[i].theory_rms));
      rules_rows.push_back(row);
    }
  }
  ExperimentResult out;
  out.title = "The probe: measured capacity beside theory";
  out.json = "probe.json";
  out.plot = "probe.png";
  out.markdown = fmt::format(
      "`recall probe --trials {} --rule-m-max {}` ({:.0f} s): ISR of stored keys against M, {} "
      "trials of {} "
      "queries. The median crossing is where the pooled median ISR falls through 1 (the "
      "trial range: the same crossing in each trial alone); the RMS crossing is what theory "
      "predicts, since "
      "theory gives E[ISR^2].\n\n{}\n"
      "Softmax ISR under each sharpness rule (median, theory RMS in brackets), L = {}, "
      "beta_0 = {}:\n\n{}\n![probe](probe.png)\n",
      r.config.trials, r.config.rule_m_max, r.seconds, r.config.trials, r.config.queries,
      markdown_table({"store", "median crossing", "trial range", "RMS crossing ± sem", "theory",
                      "RMS / theory"},
                     rows),
      r.config.ref_len, r.config.beta, markdown_table(rules_header, rules_rows));
  return out;
}

}  // namespace recall::experiment_detail
