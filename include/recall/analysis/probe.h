// The capacity probe (docs/science.md §2): keys and values uniform on the unit sphere, queries are
// stored keys, and for each store and number of memories M the interference-to-signal ratio
//   ISR_j = || sum_{i != j} w_i(k_j) v_i || / || w_j(k_j) v_j ||
// is measured over queries and trials. Memories are generated in a seeded stream and consumed once:
// the sets of memories are nested (the first M of a trial), so one pass gives the whole curve and
// the cost is that of the largest M alone.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "recall/stores/beta_rule.h"
#include "recall/stores/store.h"
#include "recall/stores/weight_function.h"

namespace recall {

struct ProbeConfig {
  std::vector<std::string> stores;  // empty: default_store_names()
  int64_t d_k = 64;
  int64_t d_v = 64;
  int64_t queries = 256;  // per trial; all keys when M < queries
  int64_t trials = 4;
  uint64_t seed = 0;
  double beta = 8.0;                 // exp<n> and softmax sharpness, and beta_0 of the rules
  std::vector<int64_t> m;            // explicit M grid; empty: powers of 2 from 16 per store (auto)
  int64_t m_max = int64_t{1} << 23;  // cap of the automatic grid
  double margin = 1.25;              // auto grid: go on until the theory ISR reaches this
  std::vector<BetaRule> rules = {BetaRule::kNone, BetaRule::kSu, BetaRule::kQwen, BetaRule::kYarn};
  double ref_len = 1024;                  // L of the rules
  int64_t rule_m_max = int64_t{1} << 22;  // rules: M = L, 2L, ... up to this
  int64_t rule_queries = 64;              // per trial, for the rule curves
  int64_t chunk = 4096;    // memories per streamed chunk on the torch-ops path (speed/memory only)
  bool reference = false;  // compute every store through its module, one M at a time (slow, checks)
  // Where the similarity and recall products run. Memories are drawn on the CPU (the same numbers
  // on every device) and copied over block by block; least squares and delta stay on the CPU.
  torch::Device device = torch::kCPU;

  // Throws std::invalid_argument naming the field, its value and the accepted range.
  void validate() const;
  std::vector<std::string> store_names() const;
};

struct IsrSummary {
  double median = 0, mean = 0, rms = 0, p10 = 0, p90 = 0;
  int64_t count = 0;
  // ISRs that are infinite: keys whose signal weight is exactly 0 (a saturated head reading
  // elsewhere), never recalled; the mean and RMS are then infinite too (null in JSON).
  int64_t unread = 0;
};
// Summary of a sample of ISRs (linear-interpolated percentiles, as numpy's default; between an
// infinite ISR and another, the percentile is infinite, never NaN).
IsrSummary summarize(std::vector<double> isr);

struct CurvePoint {
  int64_t M = 0;
  IsrSummary isr;
  std::optional<double> theory_rms;
};

// median: where the pooled median ISR crosses 1 (the headline); low/high: min/max of the same over
// trials. rms: where the pooled RMS ISR crosses 1, which is what theory predicts (theory gives
// E[ISR^2]; the median sits a few per cent lower, as ISR is skewed), with its standard error over
// trials. theory: where E[ISR^2] = 1.
struct Capacity {
  std::optional<double> median, low, high, rms, rms_sem, theory;
};

// M where the median ISR crosses 1, interpolated linearly in (log M, log ISR) between the grid
// points around the first crossing; nullopt when the curve does not cross inside the grid. With
// `level`, `rising` and `log_y`, any curve y(M) falling or rising through a level (an accuracy
// falling through 0.5, linear in y).
std::optional<double> crossing(const std::vector<int64_t>& M, const std::vector<double>& y,
                               double level = 1.0, bool rising = true, bool log_y = true);

struct StoreResult {
  std::string store;
  std::vector<CurvePoint> curve;
  Capacity capacity;
};

struct RulePoint {
  int64_t M = 0;
  double beta = 0;
  IsrSummary isr;
  double theory_rms = 0;
};

struct RuleResult {
  BetaRule rule = BetaRule::kNone;
  double ref_len = 0;
  std::vector<RulePoint> curve;
};

// Where a probe's time went, in seconds of thread time summed over threads (work inside the
// parallel regions counts once per thread that did it; the rest is wall time on one thread).
struct ProbeProfile {
  double generate = 0;    // drawing and normalising the memories
  double similarity = 0;  // the products queries x keys
  double weights = 0;     // sigma(s) / sigma(1), and taking out each query's own term
  double accumulate = 0;  // the products weights x values into the sums
  double snapshots = 0;   // the ISRs read off the sums at each grid point
  double direct = 0;      // the stores built directly (least squares, delta), in fp64
  double waits = 0;       // the fused path's threads idle in its region (no task ready for them)
};

struct ProbeResult {
  ProbeConfig config;
  ProbeProfile profile;
  std::vector<StoreResult> stores;
  std::vector<RuleResult> rules;
  double seconds = 0;
  double flops = 0;  // multiply-adds x 2 of the similarity and recall products
};

// One running sum A_j = sum_{i != j} (sigma(s_ij) / sigma(1)) v_i over the memory stream, for the
// first `queries` stored keys: shared by every store and rule point with the same weight function
// and queries, read (its ISR snapshotted) at each M of `snapshots`, and streamed up to `end`.
struct ProbeSum {
  WeightFunction weight;
  int64_t queries = 0, end = 0;
  std::vector<int64_t> snapshots;  // ascending
};

// What a probe computes, derived once from its config: the stores and their M grids, the rule
// points and their betas, and the running sums they read. Built by plan_probe, read by
// run_probe and estimate_probe_ram (and again by every run of the same plan).
struct ProbePlan {
  ProbeConfig config;
  std::vector<StoreSpec> specs;
  std::vector<std::vector<int64_t>> grids;  // per store
  std::vector<int64_t> rule_grid;
  std::vector<std::vector<double>> rule_beta;  // per rule, per rule_grid point
  std::vector<ProbeSum> sums;
  std::vector<int64_t> store_sum;              // per store: index in sums; -1: computed directly
  std::vector<std::vector<int64_t>> rule_sum;  // per rule, per rule_grid point: index in sums
  std::vector<int64_t> boundaries;             // every snapshot M, ascending: tiles end there
  int64_t end_max = 0;                         // the longest sum's end
  double work = 0;                             // memory-queries per trial
};

// Validates the config (std::invalid_argument naming the field) and plans it.
ProbePlan plan_probe(const ProbeConfig& config);

// progress(done, total) is called after each block or chunk; work is counted in memory-queries.
using ProgressFn = std::function<void(double done, double total)>;
ProbeResult run_probe(const ProbePlan& plan, const ProgressFn& progress = nullptr);
ProbeResult run_probe(const ProbeConfig& config, const ProgressFn& progress = nullptr);

// Estimated peak bytes of run_probe(plan): the streamed fp32 buffers (similarities q x chunk, per
// running sum its sums q x d_v and weights q x chunk, four blocks of the memory stream), the fp64
// matrices of the stores computed directly (keys and values of the largest M, weights q x M), and
// the ISR samples kept. `breakdown` gets the parts in words.
double estimate_probe_ram(const ProbePlan& plan, std::string* breakdown);

// The M grid each store is probed at, and each rule.
std::vector<int64_t> store_grid(const ProbeConfig& config, const std::string& store);
std::vector<int64_t> rule_grid(const ProbeConfig& config);

}  // namespace recall
