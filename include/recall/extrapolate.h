// Length extrapolation (SPEC sections 4, 6): the accuracy of trained checkpoints at multiples of
// their training length, under their trained beta rule or rules applied at evaluation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "recall/beta_rule.h"

namespace recall {

struct ExtrapolateConfig {
  std::vector<std::string> checkpoints;             // run folders or checkpoint files
  std::vector<int64_t> lengths = {1, 2, 4, 8, 16};  // multiples of each training length
  std::vector<BetaRule> rules;                      // empty: each checkpoint's trained rule
  int64_t batches = 2;  // evaluation batches of the checkpoint's batch size, as recall eval's
  // Throws std::invalid_argument naming the flag, its value and the accepted range.
  void validate() const;
};

struct ExtrapolatePoint {
  std::string checkpoint;
  BetaRule trained = BetaRule::kNone;  // the rule the checkpoint was trained with
  BetaRule rule = BetaRule::kNone;     // the rule at evaluation
  int64_t multiple = 1, seq_len = 0;
  double accuracy = 0, loss = 0;
};

// Checkpoints in order, then rules, then lengths. Throws UsageError for a checkpoint that cannot
// be read or whose learned positions do not reach the longest length.
std::vector<ExtrapolatePoint> extrapolate(const ExtrapolateConfig& config);

std::string extrapolate_table(const std::vector<ExtrapolatePoint>& points);
std::string extrapolate_json(const std::vector<ExtrapolatePoint>& points);

}  // namespace recall
