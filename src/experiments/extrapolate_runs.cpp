#include "recall/experiments/extrapolate_runs.h"

#include <fmt/format.h>

#include <filesystem>
#include <utility>

#include "recall/core/error.h"
#include "recall/train/train_config.h"

namespace recall {

namespace fs = std::filesystem;

void ExtrapolateRuns::validate() const {
  check_arg(!out_dir.empty(), "--out is empty: --config trains into a folder, give one");
  check_arg(seeds >= 1 && seeds <= 100, fmt::format("--seeds {}: must be in [1, 100]", seeds));
}

namespace {

// Trains (or resumes, or reuses) one run per rule and seed; returns the run folders.
std::vector<std::string> train_runs(const ExtrapolateRuns& config, const ExtrapolateConfig& score) {
  const auto rules = config.rules.empty() ? all_beta_rules() : config.rules;
  const TrainConfig base = train_config_from_file(config.train_config, config.sets);
  // before any training: the longest evaluation must fit
  check_length_ram(base, score.lengths, score.device, score.max_ram, false);
  std::vector<std::pair<TrainConfig, std::string>> runs;
  for (BetaRule rule : rules)
    for (int64_t k = 0; k < config.seeds; ++k) {
      auto sets = config.sets;
      sets.push_back("attn_rule=" + to_string(rule));
      sets.push_back(fmt::format("seed={}", base.trainer.seed + k));
      const std::string dir =
          (fs::path(config.out_dir) /
           (config.seeds == 1 ? to_string(rule) : fmt::format("{}-seed{}", to_string(rule), k)))
              .string();
      runs.emplace_back(train_config_from_file(config.train_config, sets), dir);
    }
  std::vector<std::string> out;
  for (const auto& [tc, dir] : runs) {
    if (config.run.progress)
      fmt::print(stderr, "extrapolate: {} {} (rule {}, seed {})\n",
                 fs::exists(fs::path(dir) / "checkpoint.bin") ? "resuming or reusing" : "training",
                 dir, to_string(tc.model.attn_rule), tc.trainer.seed);
    train_run(tc, dir, config.run);
    out.push_back(dir);
  }
  return out;
}

}  // namespace

std::vector<ExtrapolatePoint> train_and_extrapolate(const ExtrapolateRuns& runs,
                                                    ExtrapolateConfig score) {
  runs.validate();
  score.validate();
  score.checkpoints = train_runs(runs, score);
  score.rules.clear();  // each run under its own rule
  return extrapolate(score);
}

}  // namespace recall
