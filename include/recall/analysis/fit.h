// Empirical capacity of trained stores. The learned store of a feed-forward kind (feed_forward.h:
// the module a model's block uses), of width N with d_model = d_k and no biases,
//   linear      f(x) = W2 W1 x
//   mlp-<a>     f(x) = W2 a(W1 x)                  (relu, relu2, relu3, gelu)
//   glu-<g>     f(x) = W2 (g(W1 x) * W3 x)         (silu = swiglu, relu, relu2, gelu)
//   learned_kv  f(x) = Wo softmax(Wq x K^T / sqrt(d)) V   (one head, N slots)
// is trained by full-batch Adam to map M random unit keys to M random unit values (mean squared
// error). It starts from the scale of a written store (keys ~ N(0, 1) per entry, so k . x ~ N(0, 1)
// for unit x; learned_kv with Wq = sqrt(d) I and Wo = I). A memory counts as recalled when f(x_j)
// has its largest cosine with v_j among all M values (nearest-value decoding), so a recalled memory
// identifies its value among M: the store holds M log2 M bits. The capacity is the largest M
// recalled at >= `target`, found by doubling then bisection over M. Beside it, where the theory has
// the weight function: the constructed store of the same width, N memories written as keys and
// values, which holds min(N, theory_capacity) memories at ISR <= 1.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "recall/stores/feed_forward.h"
#include "recall/stores/store.h"

namespace recall {

// A feed-forward kind with its activation (mlp) or gate (glu), named as feed_forward_name spells
// it: linear, mlp-relu, ..., glu-silu, ..., learned_kv.
struct FitKind {
  FfnKind ffn = FfnKind::kMlp;
  Activation activation = Activation::kRelu2;
  bool operator==(const FitKind& o) const {
    return ffn == o.ffn &&
           (ffn == FfnKind::kLinear || ffn == FfnKind::kLearnedKv || activation == o.activation);
  }
  bool operator!=(const FitKind& o) const { return !(*this == o); }
};

std::string to_string(const FitKind& kind);
// Throws std::invalid_argument naming the value and the accepted names (swiglu = glu-silu).
FitKind fit_kind_from_string(const std::string& name);

struct FitConfig {
  FitKind kind;
  int64_t width = 16;    // N: hidden units or slots
  int64_t d_k = 32;      // key and value dimension
  int64_t steps = 1000;  // Adam steps per M, full batch
  double lr = 1e-2;
  double target = 0.99;  // fraction of memories that must be recalled
  int64_t m_max = 0;     // largest M tried; 0: 4 x parameters
  uint64_t seed = 0;
  // Where the store trains. Memories and the starting point are drawn on the CPU first, so every
  // device starts from the same numbers.
  torch::Device device = torch::kCPU;

  // Throws std::invalid_argument naming the field, its value and the accepted range.
  void validate() const;
  // The store trained: make_feed_forward of store_options(), at its starting point (seeded by
  // `gen`'s draws).
  FeedForwardOptions store_options() const;
  std::shared_ptr<Store> make_store(at::Generator& gen) const;
  int64_t parameters() const;  // of make_store: 2 N d (glu 3 N d, learned_kv 2 N d + 2 d^2)
  int64_t max_memories() const { return m_max > 0 ? m_max : 4 * parameters(); }
  // The weight function of the constructed store, where the theory has one: linear, relu,
  // relu2, relu3, swiglu (glu-silu with its input weights equal to its gate weights), softmax
  // (learned_kv, beta = sqrt(d)). None for mlp-gelu and the other gates.
  std::optional<StoreSpec> constructed_spec() const;
  // Estimated peak bytes of fit_capacity at the largest M: keys and values (M, d), the hidden
  // activations kept for the backward pass, the (M, M) scores of the recall check, and the store
  // with its gradients and Adam moments. `breakdown` gets the parts in words.
  double estimate_ram(std::string* breakdown) const;
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
  double bits_per_param = 0;          // capacity log2(capacity) / parameters
  std::optional<double> theory;       // random-key capacity of the weight function at d = d_k
  std::optional<double> constructed;  // min(N, theory); none without a theory
  std::vector<FitTrial> trials;       // in the order tried
  double seconds = 0;
};

// Trains the store of `config` on M seeded memories and measures recall.
FitTrial fit_memories(const FitConfig& config, int64_t M);

FitResult fit_capacity(const FitConfig& config);

// The readable table and the JSON of a result.
std::string fit_table(const FitResult& result);
std::string fit_json(const FitResult& result);

}  // namespace recall
