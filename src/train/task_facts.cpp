// Facts to saturation: a parametric store's capacity in bits. A fact is worth log2(#objects) bits
// when its object is known for sure and nothing when the model is at chance; the cross-entropy in
// bits is what the model still lacks, so N (log2 O - CE) is what it holds.
#include <fmt/format.h>

#include <cmath>
#include <numeric>

#include "recall/core/error.h"
#include "recall/train/task.h"

namespace recall {

FactsTask::FactsTask(const TaskConfig& config, uint64_t seed) : config_(config) {
  const int64_t S = config.facts_subjects, R = config.facts_relations, N = config.facts_n;
  check_arg(
      N >= 1 && N <= S * R,
      fmt::format("facts_n = {}: must be in [1, facts_subjects * facts_relations = {}]", N, S * R));
  // a stream of its own, so that the fact table does not depend on how training draws batches
  Rng rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::vector<int64_t> cells(static_cast<size_t>(S * R));
  std::iota(cells.begin(), cells.end(), 0);
  std::uniform_int_distribution<int64_t> object(0, config.facts_objects - 1);
  for (int64_t i = 0; i < N; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, S * R - 1);
    std::swap(cells[i], cells[pick(rng)]);
    subject_.push_back(cells[i] / R);
    relation_.push_back(S + cells[i] % R);
    object_.push_back(S + R + object(rng));
  }
}

int64_t FactsTask::vocab_size() const {
  return config_.facts_subjects + config_.facts_relations + config_.facts_objects;
}

Batch FactsTask::make(const std::vector<int64_t>& ids) const {
  const auto B = static_cast<int64_t>(ids.size());
  auto x = torch::zeros({B, 2}, torch::kInt64), y = torch::zeros({B, 2}, torch::kInt64);
  auto mask = torch::zeros({B, 2}, torch::kBool);
  auto xa = x.accessor<int64_t, 2>(), ya = y.accessor<int64_t, 2>();
  for (int64_t b = 0; b < B; ++b) {
    xa[b][0] = subject_[ids[b]];
    xa[b][1] = relation_[ids[b]];
    ya[b][0] = relation_[ids[b]];
    ya[b][1] = object_[ids[b]];
  }
  mask.select(1, 1).fill_(true);
  return {x, y, mask};
}

Batch FactsTask::sample(int64_t batch, int64_t seq_len, Rng& rng) const {
  std::uniform_int_distribution<int64_t> pick(0, static_cast<int64_t>(object_.size()) - 1);
  std::vector<int64_t> ids(static_cast<size_t>(batch));
  for (auto& id : ids) id = pick(rng);
  return make(ids);
}

std::vector<Batch> FactsTask::eval_set(int64_t batches, int64_t batch, int64_t seq_len,
                                       Rng& rng) const {
  std::vector<Batch> set;
  const auto N = static_cast<int64_t>(object_.size());
  for (int64_t begin = 0; begin < N; begin += batch) {
    std::vector<int64_t> ids(static_cast<size_t>(std::min(batch, N - begin)));
    std::iota(ids.begin(), ids.end(), begin);
    set.push_back(make(ids));
  }
  return set;
}

std::map<std::string, double> FactsTask::summarise(double ce_nats, double accuracy,
                                                   int64_t n_scored, int64_t n_params) const {
  auto out = Task::summarise(ce_nats, accuracy, n_scored, n_params);
  const double ce_bits = ce_nats / std::log(2.0);
  const double bits =
      static_cast<double>(config_.facts_n) * (std::log2(config_.facts_objects) - ce_bits);
  out["ce_bits"] = ce_bits;
  out["bits"] = bits;
  out["params"] = static_cast<double>(n_params);
  out["bits_per_param"] = bits / static_cast<double>(n_params);
  return out;
}

}  // namespace recall
