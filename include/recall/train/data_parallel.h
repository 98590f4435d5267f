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
#include <functional>

#include "recall/core/step_profile.h"
#include "recall/core/torch.h"
#include "recall/models/transformer.h"
#include "recall/train/task.h"

namespace recall {

// Called on the calling thread with parameter i (index into model->parameters()) and its gradient
// from this backward, as soon as that gradient is complete: the cross-process all-reduce
// (recall/train/distributed.h) starts on it while the rest of the backward runs.
using GradReady = std::function<void(size_t param_index, const torch::Tensor& grad)>;

// The trainer's loss on `batch` (x, y, mask: (B, T)): the cross-entropy summed over the scored
// positions (mask true) of the batch, divided by `scored_total` (<= 0: the batch's own count, so
// the mean). A process training on a slice of a global batch passes the global count, so that the
// slices' losses and gradients add up to the global batch's. Adds its gradient into the
// parameters' .grad (an undefined .grad takes the gradient itself). workers <= 1, B == 1, a
// batch on a non-CPU device or RECALL_KERNELS=reference: one backward over the whole batch on the
// calling thread, with torch's own threading. Returns the loss.
//
// `profile`, when given, gains the seconds of the forward and backward by part, from the ops
// recorded while an OpRecorder is alive (recall/core/step_profile.h): each worker's parts, the
// mean over the workers (they run side by side, so the mean is their share of the wall time),
// the time they wait for the slowest (kWaits), and the sum of their gradients (kGradSum). The
// parts add up to this call's wall time.
double data_parallel_backward(Transformer& model, const Batch& batch, int workers,
                              int64_t scored_total = 0, const GradReady& ready = {},
                              StepProfile* profile = nullptr);

}  // namespace recall
