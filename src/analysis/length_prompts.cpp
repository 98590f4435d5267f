#include "recall/analysis/length_prompts.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>

#include "recall/core/enum_names.h"
#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/train/estimates.h"
#include "recall/train/trainer.h"

namespace recall {

namespace {
constexpr std::array<const char*, 2> kPairsNames = {"fixed", "grow"};
}  // namespace

std::string to_string(PairsAtLength v) {
  return enum_name(kPairsNames, v);
}

PairsAtLength pairs_at_length_from_string(const std::string& s) {
  return enum_from_name<PairsAtLength>(kPairsNames, s, "--pairs");
}

int64_t mqar_pairs_at(const TrainConfig& config, int64_t multiple, PairsAtLength mode) {
  const int64_t trained = config.task.mqar_pairs;
  if (mode == PairsAtLength::kFixed) return trained;
  const int64_t keys =
      MqarTask::value_begin(config.model.vocab_size, config.task.mqar_values) - 1;  // [1, value)
  // 4 pairs a token at most fit (MqarTask), and seq_len >= 4 mqar_pairs already
  return std::max(trained, std::min(trained * multiple, keys));
}

std::vector<Batch> length_prompts(const Task& task, const TrainConfig& config, int64_t seq_len,
                                  int64_t batches, int64_t pairs, int64_t max_sequences) {
  Rng rng(static_cast<uint64_t>(config.trainer.seed) ^ 0x5bd1e9955bd1e995ULL);  // as recall eval
  if (config.task.kind != TaskKind::kMqar)
    return task.eval_set(batches, config.trainer.batch_size, seq_len, rng);
  // mqar draws one sequence after another from the generator: the same prompts at any chunk size
  int64_t sequences = batches * config.trainer.batch_size;
  if (max_sequences > 0) sequences = std::min(sequences, max_sequences);
  const int64_t per =
      std::min(config.trainer.batch_size, std::max<int64_t>(1, kEvalTokens / seq_len));
  const Task* from = &task;
  std::unique_ptr<Task> more;
  if (pairs > 0 && pairs != config.task.mqar_pairs) {
    more = std::make_unique<MqarTask>(config.model.vocab_size, pairs, config.task.mqar_values);
    from = more.get();
  }
  std::vector<Batch> set;
  for (int64_t done = 0; done < sequences; done += per) {
    auto part = from->eval_set(1, std::min(per, sequences - done), seq_len, rng);
    set.insert(set.end(), part.begin(), part.end());
  }
  return set;
}

void check_length_multiples(const std::vector<int64_t>& multiples) {
  check_arg(!multiples.empty(), "--lengths is empty: give multiples of the training length");
  for (int64_t m : multiples)
    check_arg(m >= 1 && m <= kMaxLengthMultiple,
              fmt::format("--lengths {}: each must be in [1, {}]; the memory estimate bounds "
                          "them further",
                          m, kMaxLengthMultiple));
}

void check_length_ram(const TrainConfig& config, const std::vector<int64_t>& multiples,
                      const torch::Device& device, int64_t max_ram, bool all_weights) {
  for (int64_t m : multiples) {
    const int64_t T = m * config.model.seq_len;
    const int64_t per = std::min(config.trainer.batch_size, std::max<int64_t>(1, kEvalTokens / T));
    std::string parts;
    const double bytes = estimate_eval_ram(config, T, per, device, &parts, all_weights);
    check_ram(fmt::format("--lengths {} ({} tokens)", m, T), bytes, parts, max_ram);
  }
}

std::vector<MqarQueries> mqar_queries(const Batch& b, int64_t pairs) {
  auto x = b.x.accessor<int64_t, 2>();
  auto mask = b.mask.accessor<bool, 2>();
  std::vector<MqarQueries> out(static_cast<size_t>(b.x.size(0)));
  for (int64_t s = 0; s < b.x.size(0); ++s)
    for (int64_t t = 2 * pairs; t < b.x.size(1); ++t) {
      if (!mask[s][t]) continue;
      for (int64_t i = 0; i < pairs; ++i)
        if (x[s][2 * i] == x[s][t]) {
          out[s].t.push_back(t);
          out[s].pair.push_back(2 * i);
          break;
        }
    }
  return out;
}

}  // namespace recall
