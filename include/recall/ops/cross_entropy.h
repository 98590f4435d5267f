// The training loss: the cross-entropy summed over rows, sum_i (log sum_j e^(x_ij) - x_i[y_i]), as
// a fused kernel beside its reference, torch's cross_entropy (reduction sum). torch runs it as a
// log_softmax that writes (n, V), a gather, and in the backward a zero-filled (n, V), a scatter and
// a log_softmax backward that reads two (n, V) and writes one; the fused kernel reads the logits
// twice forward (the row maximum, then the sum of exponentials), keeping one log-sum-exp per row,
// and once backward, writing the gradient in the same pass. Over mqar-store's 8,449 classes that
// was a fifth of a training step.
#pragma once
#include "recall/core/torch.h"

namespace recall {

// logits (n, V), targets (n,) int64 in [0, V) -> the summed cross-entropy, a scalar. The fused
// kernel on float32 CPU tensors under the fast kernels (recall/ops/kernels.h), matching
// cross_entropy_sum_reference to float32 rounding; the reference anywhere else. Differentiable in
// the logits.
torch::Tensor cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets);

// torch::nn::functional::cross_entropy with reduction sum: the fallback and the tests' reference.
torch::Tensor cross_entropy_sum_reference(const torch::Tensor& logits,
                                          const torch::Tensor& targets);

}  // namespace recall
