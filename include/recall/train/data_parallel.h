// Data parallelism inside one training step on a multi-core CPU: the batch is split into `workers`
// row slices; each slice runs forward and backward on its own thread with torch single-threaded
// (threads kept for the life of the process, one set per worker count, so steps start no threads),
// and the gradients of the shared parameters accumulate (autograd locks each accumulation). The
// result is the gradient of the mean loss over the whole batch, as one backward would give, but
// with no fork/join per tensor op: workers only meet once per step. On small models with many small
// ops this beats intra-op threading, and it degrades gracefully when the cores are shared.
#pragma once
#include <torch/torch.h>

#include "recall/models/model.h"

namespace recall {

// inputs, targets: (B, T) int64 tokens. Computes the mean next-token cross-entropy over all B x T
// positions and accumulates its gradient into the parameters' grads. workers <= 1 (or B == 1) runs
// on the calling thread with torch's own threading. Returns the loss.
double data_parallel_backward(Transformer& model, const torch::Tensor& inputs,
                              const torch::Tensor& targets, int workers);

}  // namespace recall
