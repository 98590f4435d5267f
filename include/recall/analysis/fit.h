// Empirical capacity of trainable stores (issue 5). A two-layer store of width N
//   f(x) = sum_i w_i(x) v_i,   w_i(x) = sigma(k_i . x)   (mlp-relu, mlp-relu2)
//                              w_i(x) = silu(g_i . x) (u_i . x)   (swiglu, own gate and input)
//                              w(x)   = softmax(K x)   (learned_kv: N learned slots)
// is trained by full-batch Adam to map M random unit keys to M random unit values (mean squared
// error). A memory counts as recalled when f(x_j) has its largest cosine with v_j among all M
// values (nearest-value decoding), so a recalled memory identifies its value among M: the store
// holds M log2 M bits. The capacity is the largest M recalled at >= `target`, found by doubling
// then bisection over M. Beside it: the constructed store of the same width, N memories written
// as keys and values, which holds min(N, theory_capacity) memories at ISR <= 1.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "recall/stores/store.h"

namespace recall {

enum class FitKind { kMlpRelu, kMlpRelu2, kSwiglu, kLearnedKv };

std::string to_string(FitKind kind);
// Throws std::invalid_argument naming the value and the accepted names.
FitKind fit_kind_from_string(const std::string& name);

struct FitConfig {
  FitKind kind = FitKind::kMlpRelu2;
  int64_t width = 16;    // N: hidden units or slots
  int64_t d_k = 32;      // key and value dimension
  int64_t steps = 1000;  // Adam steps per M, full batch
  double lr = 1e-2;
  double target = 0.99;  // fraction of memories that must be recalled
  int64_t m_max = 0;     // largest M tried; 0: 4 x parameters
  uint64_t seed = 0;

  // Throws std::invalid_argument naming the field, its value and the accepted range.
  void validate() const;
  int64_t parameters() const;  // 2 N d (3 N d for swiglu)
  int64_t max_memories() const { return m_max > 0 ? m_max : 4 * parameters(); }
  // The weight function of the constructed store: relu, relu2, swiglu, softmax (beta = sqrt(d)).
  StoreSpec constructed_spec() const;
};

struct FitTrial {
  int64_t M = 0;
  double recalled = 0;  // fraction of the M memories recalled
  double loss = 0;      // final mean squared error
};

struct FitResult {
  FitConfig config;
  int64_t capacity = 0;  // largest M recalled at >= target (0: not even M = 1)
  bool capped = false;   // capacity reached m_max: the true capacity may be larger
  int64_t parameters = 0;
  double memories_per_param = 0;
  double bits_per_param = 0;     // capacity log2(capacity) / parameters
  std::optional<double> theory;  // random-key capacity of the weight function at d = d_k
  double constructed = 0;        // min(N, theory)
  std::vector<FitTrial> trials;  // in the order tried
  double seconds = 0;
};

// Trains the store of `config` on M seeded memories and measures recall.
FitTrial fit_memories(const FitConfig& config, int64_t M);

FitResult fit_capacity(const FitConfig& config);

// The readable table and the JSON of a result.
std::string fit_table(const FitResult& result);
std::string fit_json(const FitResult& result);

}  // namespace recall
