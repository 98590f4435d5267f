// `recall inspect`: a trained model's layers as memory stores (docs/science.md §5), each
// feed-forward layer (inspect_ffn.h) and, for mqar checkpoints, each attention head at multiples
// of the training length under each beta rule (inspect_heads.h); as a table, JSON and a plot.
#pragma once
#include <string>
#include <vector>

#include "recall/analysis/inspect_ffn.h"
#include "recall/analysis/inspect_heads.h"
#include "recall/analysis/length_prompts.h"
#include "recall/stores/beta_rule.h"
#include "recall/train/trainer.h"

namespace recall {

struct InspectConfig {
  std::vector<int64_t> lengths = {1, 2, 4, 8, 16};  // multiples of the training length
  std::vector<BetaRule> rules = all_beta_rules();
  int64_t batches = 2;  // evaluation batches of the checkpoint's batch size
  bool ablate = true;   // score the model once more per head with that head zeroed
  PairsAtLength pairs = PairsAtLength::kFixed;  // the mqar pairs of the longer prompts
  int64_t max_ram = 0;  // bytes the lengths may need (check_length_ram); 0: what is free
  // Throws std::invalid_argument naming the flag, its value and the accepted range.
  void validate() const;
};

struct InspectResult {
  std::string checkpoint;
  int64_t step = 0;
  ModelConfig model;
  std::vector<FfnStoreReport> ffn;
  std::vector<AttentionReport> attention;  // empty unless the task is mqar
};

// Restores nothing itself: `restored` comes from restore(path). Changes the model's beta rule.
InspectResult inspect(Restored& restored, const InspectConfig& config,
                      const std::string& checkpoint);

std::string inspect_table(const InspectResult& result);
std::string inspect_json(const InspectResult& result);
// mqar checkpoints: accuracy, and the recalling heads' median ISR, against length per rule; other
// tasks: each feed-forward layer's key ISR (median, p10 to p90). PNG or SVG by the extension.
void write_inspect_plot(const InspectResult& result, const std::string& path);

}  // namespace recall
