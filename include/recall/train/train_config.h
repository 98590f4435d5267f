// One flat, typed TOML file configures a training run: the model keys of ModelConfig, the task keys
// and the trainer keys side by side. Every key has a type and a range; an unknown key, a value of
// the wrong type or out of range is refused with std::invalid_argument naming the key, the value
// and what is accepted. `--set key=value` overrides go through the same checks.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recall/models/transformer.h"
#include "recall/ops/precision.h"

namespace recall {

enum class TaskKind { kMqar, kFacts, kText };
enum class TextUnits { kByte, kCodepoint };

struct TaskConfig {
  TaskKind kind = TaskKind::kMqar;
  int64_t mqar_pairs = 8;   // key/value pairs per sequence; vocab_size and seq_len are model keys
  int64_t mqar_values = 0;  // value tokens, the last of the vocabulary; 0: half of it (MqarTask)
  int64_t facts_n = 1000;   // number of (subject, relation) -> object facts
  int64_t facts_subjects = 200;
  int64_t facts_relations = 10;
  int64_t facts_objects = 64;
  // UTF-8 corpus, a file or a folder; empty: the default corpus (task.h). A relative path in a
  // config file is relative to that file.
  std::string text_file;
  TextUnits text_units = TextUnits::kByte;
  double val_fraction = 0.1;  // text: contiguous tail of the text held out for evaluation
};

struct TrainerConfig {
  int64_t steps = 1000;
  int64_t batch_size = 32;
  double lr = 1e-3;      // peak learning rate, reached after warmup
  double min_lr = 1e-4;  // end of the cosine decay
  int64_t warmup_steps = 100;
  double weight_decay = 0.1;  // AdamW, applied to matrices only
  double beta1 = 0.9;
  double beta2 = 0.99;
  double grad_clip = 1.0;        // global gradient-norm clip; 0 turns it off
  int64_t eval_every = 0;        // 0: evaluate only at the end
  int64_t eval_batches = 8;      // batches per evaluation (facts: all facts, in batches)
  int64_t log_every = 10;        // progress line and metrics record every N steps
  int64_t checkpoint_every = 0;  // 0: checkpoint only at the end or when stopped
  int64_t seed = 0;
  double peak_flops = 0;  // per second, for MFU; 0: the machine's peak (recall/ops/peak_flops.h)
  // The matrix products' precision (recall/ops/precision.h): fp32, or bf16 operands with fp32
  // accumulation; weights, optimizer and checkpoints stay fp32 either way.
  Precision precision = Precision::kFp32;
};

// What validation covers: everything, or all but the model and the task's fit to it, for a caller
// that replaces the model afterwards and then validates everything (import: its model comes from
// the file, not from the defaults or --config's model keys).
enum class ModelCheck { kChecked, kReplacedLater };

struct TrainConfig {
  ModelConfig model;
  TaskConfig task;
  TrainerConfig trainer;
  // Cross-key checks (the model's own, the task's fit to the model, the schedule's fit to steps).
  void validate(ModelCheck check = ModelCheck::kChecked) const;
  // The resolved configuration as flat TOML, one key per line; parses back to the same config.
  std::string to_toml() const;
};

std::string to_string(TaskKind v);
std::string to_string(TextUnits v);

// (key, TOML literal) for every key, in the order of to_toml(). Used to name the first key that
// differs between two configurations.
std::vector<std::pair<std::string, std::string>> config_items(const TrainConfig& config);

// Parses TOML text (`source` names it in messages), then applies `overrides` ("key=value"; the
// value is a TOML literal, or a bare string). `base_dir` resolves a relative text_file of the TOML
// text. Validates the result (as `check` says). Throws std::invalid_argument on any bad key or
// value.
TrainConfig train_config_from_toml(std::string_view text, const std::string& source,
                                   const std::vector<std::string>& overrides = {},
                                   const std::string& base_dir = "",
                                   ModelCheck check = ModelCheck::kChecked);

// Reads the file and calls train_config_from_toml with its folder as base_dir. Throws UsageError
// when the file cannot be read.
TrainConfig train_config_from_file(const std::string& path,
                                   const std::vector<std::string>& overrides = {},
                                   ModelCheck check = ModelCheck::kChecked);

}  // namespace recall
