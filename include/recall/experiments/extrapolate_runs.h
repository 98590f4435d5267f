// Length extrapolation of runs trained for it: one run of a training config per beta rule and
// seed, each then scored by extrapolate (recall/analysis/extrapolate.h) under its own rule.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "recall/analysis/extrapolate.h"
#include "recall/stores/beta_rule.h"
#include "recall/train/trainer.h"

namespace recall {

struct ExtrapolateRuns {
  std::string train_config;       // a recipe of train/ or a TOML file
  std::vector<std::string> sets;  // "key=value" overrides of train_config
  // runs in out_dir/<rule>, or out_dir/<rule>-seed<k> with several seeds: a folder holding a run
  // already is resumed, and a finished run is reused
  std::string out_dir;
  int64_t seeds = 1;            // seeds seed, seed + 1, ... of the config
  std::vector<BetaRule> rules;  // the rules trained (empty: all five)
  // how each run trains; a stop request ends the call with StopRequested (recall/core/signals.h)
  // after the run's checkpoint, and the same call resumes
  RunContext run;
  // Throws std::invalid_argument naming the flag, its value and the accepted range.
  void validate() const;
};

// Trains (or resumes, or reuses) the runs in rule order, then seed order, and scores them:
// extrapolate(score) with score.checkpoints the runs and each run under its own rule (the ones
// trained under none also under score.none_also). Before any training, the longest evaluation
// must fit (check_length_ram). Throws UsageError for a config that does not parse.
std::vector<ExtrapolatePoint> train_and_extrapolate(const ExtrapolateRuns& runs,
                                                    ExtrapolateConfig score);

}  // namespace recall
