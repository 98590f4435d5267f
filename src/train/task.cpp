// What every task shares: default figures, token ids written as numbers, and the factory.
#include "recall/train/task.h"

#include <fmt/format.h>

#include <sstream>

#include "recall/core/error.h"

namespace recall {

std::map<std::string, double> Task::summarise(double ce_nats, double accuracy, int64_t n_scored,
                                              int64_t n_params) const {
  return {{"loss", ce_nats}, {"accuracy", accuracy}, {"scored", static_cast<double>(n_scored)}};
}

std::vector<int64_t> Task::encode(const std::string& text) const {
  std::istringstream in(text);
  std::vector<int64_t> ids;
  std::string word;
  while (in >> word) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check_arg(used == word.size() && id >= 0 && id < vocab_size(),
              fmt::format("prompt token '{}': this task's prompt is token ids in [0, {}) separated "
                          "by spaces",
                          word, vocab_size()));
    ids.push_back(id);
  }
  return ids;
}

std::string Task::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
  return out;
}

namespace {
int64_t seq_len_tokens(const TrainConfig& config) {
  return config.model.seq_len;
}
}  // namespace

const TaskKindRow& task_kind(TaskKind kind) {
  static const std::vector<TaskKindRow> rows = {
      {TaskKind::kMqar,
       [](const TrainConfig& c, const std::vector<int64_t>&, int64_t) -> std::unique_ptr<Task> {
         return std::make_unique<MqarTask>(c.model.vocab_size, c.task.mqar_pairs,
                                           c.task.mqar_values);
       },
       seq_len_tokens,
       [](const TrainConfig& c) {
         return static_cast<double>(c.task.mqar_pairs) / static_cast<double>(c.model.seq_len);
       },
       false},
      {TaskKind::kFacts,
       [](const TrainConfig& c, const std::vector<int64_t>&, int64_t) -> std::unique_ptr<Task> {
         return std::make_unique<FactsTask>(c.task, static_cast<uint64_t>(c.trainer.seed));
       },
       [](const TrainConfig&) -> int64_t { return 2; }, [](const TrainConfig&) { return 0.5; },
       false},
      {TaskKind::kText,
       [](const TrainConfig& c, const std::vector<int64_t>& vocabulary,
          int64_t max_ram) -> std::unique_ptr<Task> {
         return std::make_unique<TextTask>(c.task, vocabulary, max_ram);
       },
       seq_len_tokens, [](const TrainConfig&) { return 1.0; }, true},
  };
  for (const TaskKindRow& r : rows)
    if (r.kind == kind) return r;
  throw std::invalid_argument("task: unknown kind");
}

std::unique_ptr<Task> make_task(const TrainConfig& config, const std::vector<int64_t>& vocabulary,
                                int64_t max_ram) {
  return task_kind(config.task.kind).make(config, vocabulary, max_ram);
}

}  // namespace recall
