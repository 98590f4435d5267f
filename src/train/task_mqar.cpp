// Zoology's MQAR generator. The query region holds each context key exactly once, at even offsets,
// with filler 0 between; the targets are the inputs shifted by one, so the query key's position
// predicts its value and nothing else in the sequence is scored.
#include <fmt/format.h>

#include <numeric>

#include "recall/core/error.h"
#include "recall/train/task.h"

namespace recall {
namespace {

// k distinct draws from [0, n): the first k of a partial Fisher-Yates shuffle.
std::vector<int64_t> choose_distinct(int64_t n, int64_t k, Rng& rng) {
  std::vector<int64_t> pool(static_cast<size_t>(n));
  std::iota(pool.begin(), pool.end(), 0);
  for (int64_t i = 0; i < k; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, n - 1);
    std::swap(pool[i], pool[pick(rng)]);
  }
  pool.resize(static_cast<size_t>(k));
  return pool;
}

}  // namespace

MqarTask::MqarTask(int64_t vocab_size, int64_t pairs, int64_t values)
    : vocab_(vocab_size), pairs_(pairs), values_(values) {
  check_arg(pairs >= 1, fmt::format("mqar_pairs = {}: must be >= 1", pairs));
  check_arg(values >= 0, fmt::format("mqar_values = {}: must be >= 0", values));
  const int64_t need = values > 0 ? pairs + values + 1 : 2 * pairs + 1;
  check_arg(vocab_size >= need,
            fmt::format("vocab_size = {}: mqar with {} pairs{} needs >= {}", vocab_size, pairs,
                        values > 0 ? fmt::format(" and {} values", values) : "", need));
}

Batch MqarTask::sample(int64_t batch, int64_t seq_len, Rng& rng) const {
  const int64_t n = pairs_, T = seq_len;
  check_arg(T >= 4 * n, fmt::format("seq_len = {}: mqar with {} pairs needs >= {}", T, n, 4 * n));
  const int64_t n_keys = value_begin() - key_begin(), n_values = vocab_ - value_begin();
  const int64_t n_slots = (T - 1 - 2 * n) / 2 + 1;  // even offsets p with 2n + p <= T - 1
  std::vector<int64_t> x(batch * T, 0), y(batch * T, 0);
  std::vector<uint8_t> mask(batch * T, 0);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t* xb = x.data() + b * T;
    int64_t* yb = y.data() + b * T;
    const auto keys = choose_distinct(n_keys, n, rng);
    std::vector<int64_t> values;
    if (n <= n_values) {
      values = choose_distinct(n_values, n, rng);
    } else {
      std::uniform_int_distribution<int64_t> pick(0, n_values - 1);
      for (int64_t i = 0; i < n; ++i) values.push_back(pick(rng));
    }
    for (int64_t i = 0; i < n; ++i) {
      xb[2 * i] = key_begin() + keys[i];
      xb[2 * i + 1] = value_begin() + values[i];
    }
    const auto slots = choose_distinct(n_slots, n, rng);  // slot i queries pair i
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = 2 * n + 2 * slots[i];
      xb[p] = key_begin() + keys[i];
      yb[p] = value_begin() + values[i];
      mask[b * T + p] = 1;
    }
    // context targets are the next token (unscored); keeps y a plain shift where it is defined
    for (int64_t t = 0; t + 1 < 2 * n; ++t) yb[t] = xb[t + 1];
  }
  auto opts = torch::TensorOptions().dtype(torch::kInt64);
  return {torch::from_blob(x.data(), {batch, T}, opts).clone(),
          torch::from_blob(y.data(), {batch, T}, opts).clone(),
          torch::from_blob(mask.data(), {batch, T}, torch::kUInt8).to(torch::kBool)};
}

std::vector<Batch> MqarTask::eval_set(int64_t batches, int64_t batch, int64_t seq_len,
                                      Rng& rng) const {
  std::vector<Batch> set;
  for (int64_t i = 0; i < batches; ++i) set.push_back(sample(batch, seq_len, rng));
  return set;
}

}  // namespace recall
