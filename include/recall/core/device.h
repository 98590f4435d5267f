// The device a computation runs on. Commands take --device cpu | cuda | cuda:N; parse_device is the
// one place that turns that text into a torch::Device and refuses a CUDA device that this build or
// machine does not have. Tensors are then made on their inputs' device (x.options()), and the CPU
// fast paths fall back to torch's ops elsewhere (fast_kernels in recall/ops/kernels.h).
#pragma once
#include <string>

#include "recall/core/torch.h"

namespace recall {

// "cpu", "cuda" (CUDA device 0) or "cuda:N". Throws UsageError naming the value and the fix for
// anything else, for cuda on a build or machine without CUDA, and for N past the last device.
torch::Device parse_device(const std::string& text);

// Waits until the work queued on `device` is done (CUDA runs kernels asynchronously), so that a
// wall-clock timing covers it; returns at once on the CPU.
void synchronize(const torch::Device& device);

}  // namespace recall
