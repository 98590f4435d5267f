// The probe's relative weights sigma(s) / sigma(1): the signal weight of a stored key queried by
// itself is sigma(1), so the ISR is the same with every weight divided by it, and softmax's
// exp(beta (s - 1)) stays finite at any beta.
#pragma once
#include <cstdint>

#include "recall/core/torch.h"
#include "recall/stores/weight_function.h"

namespace recall {

// sigma(s) / sigma(1), elementwise with torch ops, in the dtype of s: the reference.
torch::Tensor relative_weights(const WeightFunction& w, const torch::Tensor& s);

// The same on float rows, in one vectorised pass: W[i, j] = sigma(S[i, j]) / sigma(1) for
// rows x cols, row strides lds and ldw (W may be S). Matches relative_weights to about 1e-6
// relative (exp to 2e-7); softmax weights below e^-87 come out as about e^-87 (float's smallest
// normal), negligible beside the signal's 1.
void relative_weights_rows(const WeightFunction& w, const float* S, int64_t lds, float* W,
                           int64_t ldw, int64_t rows, int64_t cols);

}  // namespace recall
