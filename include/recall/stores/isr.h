// The interference-to-signal ratio of a store recalling its own memories (docs/science.md §2):
// query j recalls memory j with weights W_j over the M memories, and
//   ISR_j = || sum_{i != j} W_ji v_i || / || W_jj v_j || = || sum_{i != j} W_ji v_i || / (|W_jj|
//   |v_j|).
// Memory j is recalled when ISR_j < 1. With orthonormal values (an attention head, whose values are
// one-hot positions) it is || W_j,-j ||_2 / W_jj.
#pragma once
#include "recall/core/torch.h"

namespace recall {

// ISR_j of queries j = 0..Q-1 from recall weights (Q, M), Q <= M, and values (M, d_v): (Q,). The
// interference is summed with W_jj left out, not as f(x_j) - W_jj v_j, so it does not cancel when
// the signal dominates. value_norms (Q,) |v_j| when the caller knows them (the probe's values are
// unit by construction, and its streamed sums divide by |W_jj| alone); undefined: from values.
torch::Tensor self_recall_isr(const torch::Tensor& weights, const torch::Tensor& values,
                              const torch::Tensor& value_norms = {});

}  // namespace recall
