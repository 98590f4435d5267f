// Length extrapolation (docs/science.md §4, §6): does a beta that grows with log M keep recall at
// longer contexts in a trained model? Checkpoints are evaluated under their trained rule or rules
// applied at evaluation: accuracy at multiples of the training length. Training the runs, one per
// beta rule and seed, is the experiments layer's (recall/experiments/extrapolate_runs.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "recall/analysis/length_prompts.h"
#include "recall/stores/beta_rule.h"

namespace recall {

struct ExtrapolateConfig {
  std::vector<std::string> checkpoints;  // run folders or checkpoint files
  // the rules at evaluation (empty: each checkpoint's trained rule)
  std::vector<BetaRule> rules;
  // The checkpoints trained under none are also scored under these rules: qwen and yarn leave
  // beta unchanged for M <= L, so training under them is training under none (the same losses,
  // bit for bit), and a run trained under none read under them stands for it.
  std::vector<BetaRule> none_also;
  std::vector<int64_t> lengths = {1, 2, 4, 8, 16};  // multiples of each training length
  // Evaluation batches of the checkpoint's batch size, as recall eval's. With the pairs grown g
  // times, 1/g of those prompts (4 at least): as many scored queries at every length.
  int64_t batches = 2;
  PairsAtLength pairs = PairsAtLength::kFixed;  // the mqar pairs of the longer prompts
  torch::Device device = torch::kCPU;           // where checkpoints are evaluated
  int64_t max_ram = 0;  // bytes the lengths may need (check_length_ram); 0: what is free
  // Throws std::invalid_argument naming the flag, its value and the accepted range.
  void validate() const;
};

struct ExtrapolatePoint {
  std::string checkpoint;
  BetaRule trained = BetaRule::kNone;  // the rule the checkpoint was trained with
  BetaRule rule = BetaRule::kNone;     // the rule at evaluation
  int64_t multiple = 1, seq_len = 0;
  int64_t pairs = 0;  // mqar pairs in each prompt
  double accuracy = 0, loss = 0;
};

// Checkpoints in order, then rules, then lengths. Throws UsageError for a checkpoint that cannot be
// read, or learned positions that do not reach the longest length.
std::vector<ExtrapolatePoint> extrapolate(const ExtrapolateConfig& config);

// A run that never formed its recall circuit says nothing about length: the checkpoints whose
// accuracy at 1x under their own rule is below `learned` (in order), and the points of the rest.
std::vector<std::string> unlearned_runs(const std::vector<ExtrapolatePoint>& points,
                                        double learned = 0.9);
std::vector<ExtrapolatePoint> learned_points(const std::vector<ExtrapolatePoint>& points,
                                             const std::vector<std::string>& unlearned);
// The checkpoint of the first run in `points` trained under `trained` that learned (as above), ""
// when there is none.
std::string first_learned_run(const std::vector<ExtrapolatePoint>& points, BetaRule trained,
                              double learned = 0.9);

// Mean accuracy over the checkpoints of each (trained rule, rule at evaluation), per multiple.
struct ExtrapolateCurve {
  BetaRule trained = BetaRule::kNone, rule = BetaRule::kNone;
  int64_t runs = 0;
  std::vector<int64_t> multiples;
  std::vector<int64_t> pairs;     // mqar pairs (memories) per prompt at each multiple
  std::vector<double> accuracy;   // mean over runs
  std::vector<double> low, high;  // smallest and largest over runs
};
std::vector<ExtrapolateCurve> extrapolate_curves(const std::vector<ExtrapolatePoint>& points);

std::string extrapolate_table(const std::vector<ExtrapolatePoint>& points);
std::string extrapolate_json(const std::vector<ExtrapolatePoint>& points);
// The points of extrapolate_json's text (read again by a later step of the report). Throws
// std::invalid_argument naming `source` for text that is not such JSON.
std::vector<ExtrapolatePoint> read_extrapolate_json(const std::string& text,
                                                    const std::string& source);
// Accuracy against the multiple of the training length (log2), or with `memories` against the
// mqar pairs in context, one line per curve, the range over runs as error bars. PNG or SVG by the
// extension.
void write_extrapolate_plot(const std::vector<ExtrapolatePoint>& points, const std::string& path,
                            bool memories = false);

}  // namespace recall
