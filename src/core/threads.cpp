#include "recall/core/threads.h"

#include <torch/torch.h>

#include <thread>

#include "recall/core/error.h"

namespace recall {

int set_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(n);
  return n;
}

std::string check_device(const std::string& device) {
  if (device == "cpu") return device;
  if (device == "cuda") {
    if (!torch::cuda::is_available())
      throw UsageError("--device cuda: no CUDA device is available here; use --device cpu");
    return device;
  }
  throw UsageError(fmt::format("--device {}: unknown device; use cpu or cuda", device));
}

}  // namespace recall
