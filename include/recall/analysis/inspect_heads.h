// A trained model's attention heads as softmax stores (docs/science.md §5).
//
// Attention heads, on mqar prompts: at a scored query position t, whose key token sits in the
// context at position 2i (its value at 2i + 1), a head that recalls reads one position of the
// pair's neighbourhood 2i + o: o = 0 the key, o = 1 the value (the classic induction head, after a
// previous-token head or the convolution of q, k, v put the key into the value's position, as
// mqar-tiny learns), o = 2 the next key's position (after a first-layer head gathered both the key
// and the value there, as mqar-tiny with RoPE learned). Each
// head's read offset o is the one that takes the most weight over the prompts. With a_s its
// attention weights (softmax over the keys t sees) and a_r the weight on r = 2i + o,
//   ISR_t = || a_{s != r} ||_2 / a_r
// is the ISR of the head as a softmax store with orthogonal values. A head recalls a query when its
// largest weight is on r; it is a recalling head when it does so for >= half the queries. The
// model's accuracy with the head's output zeroed (ablated) says whether the model needs it.
#pragma once
#include <vector>

#include "recall/analysis/length_prompts.h"
#include "recall/analysis/probe.h"
#include "recall/models/transformer.h"
#include "recall/stores/beta_rule.h"
#include "recall/train/task.h"

namespace recall {

struct HeadReport {
  int64_t layer = 0, head = 0;
  int64_t offset = 0;           // read position 2i + offset for the pair at 2i
  double pair_weight = 0;       // mean attention weight on the read position
  double hit_rate = 0;          // fraction of queries with the largest weight there
  double ablated_accuracy = 0;  // the model's accuracy with this head zeroed (NaN: not ablated)
  IsrSummary isr;
  bool recalls() const { return hit_rate >= 0.5; }
};

struct AttentionReport {
  int64_t seq_len = 0;
  int64_t pairs = 0;  // mqar pairs in each prompt
  BetaRule rule = BetaRule::kNone;
  double accuracy = 0;  // the model's mqar accuracy on the same prompts
  int64_t prompts = 0;  // sequences read
  std::vector<HeadReport> heads;
};

// inspect reads every head's weights over whole prompts, (B, H, T, T) per layer: at m times the
// training length it takes 1/m of the prompts (the same tokens), and at least this many.
inline constexpr int64_t kInspectMinSequences = 4;

// Per head statistics of `model` on mqar batches with `pairs` key/value pairs.
std::vector<HeadReport> inspect_heads(Transformer& model, const std::vector<Batch>& set,
                                      int64_t pairs);

// Fills ablated_accuracy of each head: the accuracy on `set` with that head's output zeroed.
void ablate_heads(Transformer& model, const Task& task, const std::vector<Batch>& set,
                  std::vector<HeadReport>& heads);

}  // namespace recall
