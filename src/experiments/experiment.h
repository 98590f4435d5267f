// What the experiment files (src/experiments/experiment_*.cpp) share: one Experiment per run of
// `recall experiment NAME`, its run folders, and the Markdown helpers of the writers
// (experiment_<name>_output.cpp). Private to this layer.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "recall/core/io.h"
#include "recall/experiments/experiments.h"
#include "recall/experiments/extrapolate_runs.h"
#include "recall/experiments/report.h"
#include "recall/train/trainer.h"

namespace recall::experiment_detail {

namespace fs = std::filesystem;

inline double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// A table cell of one value per seed: "mean [min, max]" when there are several, else the value.
inline std::string mean_range(const std::vector<double>& v, const char* mean_f = "{:.3f}",
                              const char* range_f = "{:.3f}") {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const std::string m = fmt::format(fmt::runtime(mean_f), mean(v));
  if (v.size() < 2) return m;
  return m + fmt::format(fmt::runtime(fmt::format(" [{0}, {0}]", range_f)), *lo, *hi);
}

// "none, su, ssmax" (or, with sep ",", as a command's --rules takes them)
inline std::string rule_list(const std::vector<BetaRule>& rules, const char* sep = ", ") {
  std::vector<std::string> names;
  for (BetaRule r : rules) names.push_back(to_string(r));
  return fmt::format("{}", fmt::join(names, sep));
}

// A value in JSON, null where it is missing.
template <class T>
nlohmann::json json_or_null(const std::optional<T>& x) {
  return x ? nlohmann::json(*x) : nlohmann::json(nullptr);
}

// What each experiment found: measured by its method of Experiment (experiment_<name>.cpp), then
// written, JSON, plot and report section, by its writer (experiment_<name>_output.cpp); both are
// declared in experiment_<name>.h and named by its row of experiment_rows().
struct TheoryFound;
struct ProbeFound;
struct MqarFound;
struct HeadsFound;
struct FitFound;
struct FactsKvFound;
struct SharpnessFound;
struct ScalingFound;
struct FactsFound;
struct LmFound;
struct ExtrapolationFound;
struct ExtrapolationStoreFound;

class Experiment {
 public:
  explicit Experiment(const ExperimentConfig& c) : config_(c), sizes_(experiment_sizes(c.quick)) {}
  // The experiment's own step count, or the config's override.
  int64_t steps(int64_t own) const { return config_.steps > 0 ? config_.steps : own; }
  std::string path(const std::string& name) const {
    return (fs::path(config_.out_dir) / name).string();
  }
  std::string run_dir(const std::string& name) const {
    return (fs::path(config_.out_dir) / "runs" / name).string();
  }

  // Trains the recipe `preset` with `sets` into runs/<name> (reusing a finished run there).
  TrainResult train_run(const std::string& preset, const std::vector<std::string>& sets,
                        const std::string& name) const {
    if (config_.run.progress)
      fmt::print(stderr, "experiment {}: {}\n", config_.name, run_dir(name));
    return recall::train_run(train_config_from_file(preset, sets), run_dir(name), context());
  }
  const RunContext& context() const { return config_.run; }
  const ExperimentConfig& config() const { return config_; }
  // Every row's sizes (experiment_rows()), quick or not; --steps is applied by steps().
  const ExperimentSizes& sizes() const { return sizes_; }
  // out_dir/name, written atomically, two-space indented.
  void write_json(const std::string& name, const nlohmann::json& j) const {
    write_file_atomic(path(name), j.dump(2) + "\n");
  }

  // One per row of experiment_rows(), in its order; each in experiment_<name>.cpp.
  TheoryFound theory();
  ProbeFound probe();
  MqarFound mqar();
  HeadsFound heads();
  FitFound fit();
  FactsKvFound facts_kv();
  SharpnessFound sharpness();
  ScalingFound scaling();
  FactsFound facts();
  LmFound lm();
  ExtrapolationFound extrapolation();
  // extrapolation's second part, mqar-store (sizes: the store's, with --steps applied); its
  // writer, write_extrapolation_store, writes extrapolation_store.json and its two plots and
  // returns its Markdown
  ExtrapolationStoreFound extrapolation_store(const ExperimentSizes& sizes);

 private:
  const ExperimentConfig& config_;
  const ExperimentSizes sizes_;
};

inline std::string opt_num(const std::optional<double>& x, const char* f = "{:.4g}") {
  return x ? fmt::format(fmt::runtime(f), *x) : "—";
}

// The runs of a recipe trained for length extrapolation, set up the one way every experiment sets
// them up: `recipe` with `sets` at `steps`, `seeds` per rule, under
// runs_dir/<recipe><tag>-<steps> (a folder per rule and seed), trained with `context`.
inline ExtrapolateRuns extrapolation_runs(const std::string& runs_dir, const std::string& recipe,
                                          const std::string& tag, std::vector<std::string> sets,
                                          int64_t steps, int64_t seeds, std::vector<BetaRule> rules,
                                          const RunContext& context) {
  ExtrapolateRuns runs;
  runs.train_config = recipe;
  runs.sets = std::move(sets);
  runs.sets.push_back(fmt::format("steps={}", steps));
  runs.out_dir = (fs::path(runs_dir) / fmt::format("{}{}-{}", recipe, tag, steps)).string();
  runs.seeds = seeds;
  runs.rules = std::move(rules);
  runs.run = context;
  return runs;
}

// ---------------------------------------------------------------------------------------------
// 1. Sharpness

// A feed-forward kind as the facts and language experiments train it.
struct FfnVariant {
  std::string name;  // feed_forward_name spelling
  std::vector<std::string> sets;
};

// The facts experiment's kinds, each at 12 d^2 feed-forward parameters.
const std::vector<FfnVariant>& facts_variants();

}  // namespace recall::experiment_detail
