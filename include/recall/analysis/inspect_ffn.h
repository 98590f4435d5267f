// A trained model's feed-forward layers as memory stores (docs/science.md §5).
//
// Feed-forward layers: keys are the first-layer rows (swiglu: the gate rows; learned_kv: the slot
// keys of each head), values the second-layer columns (learned_kv: the slot values). Each key k_j
// is queried as x_j = sqrt(d) k_j / ||k_j|| (the norm of an RMS-normalised input of dimension d)
// through the layer's own weights w(x) (mlp: sigma(W1 x + b1); swiglu: silu(W1 x) * (W3 x);
// learned_kv: softmax over the slots of q . k_i / sqrt(d_head), q = x_j), and
//   ISR_j = || sum_{i != j} w_i(x_j) v_i || / || w_j(x_j) v_j ||   (self_recall_isr, isr.h).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "recall/analysis/probe.h"

namespace recall {

class Store;

struct FfnStoreReport {
  int64_t layer = 0;
  std::string kind;  // linear, mlp-<activation>, glu-<gate>, learned_kv
  int64_t keys = 0;  // N (learned_kv: heads x slots)
  int64_t dim = 0;   // key dimension
  IsrSummary isr;
  double recalled = 0;                           // fraction of keys with ISR < 1
  double coherence_mean = 0, coherence_max = 0;  // |cos| between distinct keys
  std::optional<double> theory;  // random-key capacity of the weight function at d = dim
  std::string theory_store;      // the store that theory is for
};

// A block's feed-forward store (linear, mlp, glu or learned_kv; read in float64 on a copy).
FfnStoreReport inspect_feed_forward(const std::shared_ptr<Store>& ffn, int64_t layer);

}  // namespace recall
