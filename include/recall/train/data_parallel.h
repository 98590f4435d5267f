// Data parallelism inside one training step on a multi-core CPU: the batch is split into `workers`
// row slices; each slice runs forward and backward on its own thread with torch single-threaded
// (threads kept for the life of the process, one set per worker count, so steps start no threads).
// Workers only meet once per step, so there is no fork/join per tensor op; on small models with
// many small ops this beats intra-op threading, and it degrades gracefully when the cores are
// shared.
//
// The reduction order is fixed: each worker takes its gradients with torch::autograd::grad into
// tensors of its own, and they are added into the parameters' .grad in worker order afterwards.
// So for a given worker count the gradient bytes depend only on the batch and the parameters (the
// same seed gives the same run); different worker counts differ by float rounding.
#pragma once
#include <torch/torch.h>

#include "recall/models/model.h"
#include "recall/train/task.h"

namespace recall {

// The trainer's loss on `batch` (x, y, mask: (B, T)): the mean cross-entropy over the scored
// positions (mask true) of the whole batch. Adds its gradient into the parameters' .grad (an
// undefined .grad takes the gradient itself). workers <= 1, B == 1, a batch on a non-CPU device or
// RECALL_KERNELS=reference: one backward over the whole batch on the calling thread, with torch's
// own threading. Returns the
// loss.
double data_parallel_backward(Transformer& model, const Batch& batch, int workers);

}  // namespace recall
