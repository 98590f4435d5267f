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

std::unique_ptr<Task> make_task(const TrainConfig& config, const std::vector<int64_t>& vocabulary,
                                int64_t max_ram) {
  switch (config.task.kind) {
    case TaskKind::kMqar:
      return std::make_unique<MqarTask>(config.model.vocab_size, config.task.mqar_pairs,
                                        config.task.mqar_values);
    case TaskKind::kFacts:
      return std::make_unique<FactsTask>(config.task, static_cast<uint64_t>(config.trainer.seed));
    case TaskKind::kText:
      return std::make_unique<TextTask>(config.task, vocabulary, max_ram);
  }
  throw std::invalid_argument("task: unknown kind");
}

}  // namespace recall
