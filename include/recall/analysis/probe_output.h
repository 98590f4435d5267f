// Renderings of a probe result: a readable table, JSON and CSV with every number, and a gnuplot
// plot.
#pragma once
#include <string>

#include "recall/analysis/probe.h"

namespace recall {

std::string probe_table(const ProbeResult& result);
// {"config": {...}, "stores": [{"store", "curve": [{"M", "isr_median", ...}], "capacity"}],
//  "rules": [{"rule", "ref_len", "curve": [{"M", "beta", "isr_median", ...}]}]}
std::string probe_json(const ProbeResult& result);
// One row per (store or rule, M):
// kind,name,M,beta,isr_median,isr_mean,isr_rms,isr_p10,isr_p90,theory_rms
std::string probe_csv(const ProbeResult& result);
// Log-log ISR against M: stores (theory dashed, ISR = 1 marked) and rules side by side. PNG or SVG
// by the file's extension. Throws std::runtime_error when gnuplot fails.
void write_probe_plot(const ProbeResult& result, const std::string& path);

// The theory table of `recall theory`, and its JSON {"d_k", "beta", "stores": [{"store",
// "capacity", "capacity_gaussian"}]}.
std::string theory_table(int64_t d_k, double beta);
std::string theory_json(int64_t d_k, double beta);

}  // namespace recall
