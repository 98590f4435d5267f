#include "recall/core/device.h"

#include <fmt/format.h>

#include <regex>

#include "recall/core/error.h"

namespace recall {

torch::Device parse_device(const std::string& text) {
  if (text == "cpu") return torch::kCPU;
  std::smatch m;
  static const std::regex cuda("cuda(?::([0-9]{1,4}))?");
  if (!std::regex_match(text, m, cuda))
    throw UsageError(fmt::format("--device {}: unknown device; use cpu, cuda or cuda:N", text));
  if (!torch::cuda::is_available())
    throw UsageError(fmt::format(
        "--device {}: {}; use --device cpu", text,
        torch::hasCUDA() ? "no CUDA device is visible on this machine"
                         : "this build of recall has no CUDA (a CPU-only LibTorch, or built "
                           "with RECALL_CUDA=OFF)"));
  const int index = m[1].matched ? std::stoi(m[1].str()) : 0;
  const auto count = static_cast<int>(torch::cuda::device_count());
  if (index >= count)
    throw UsageError(
        fmt::format("--device {}: this machine has {} CUDA device{} (cuda:0 to cuda:{})", text,
                    count, count == 1 ? "" : "s", count - 1));
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(index)};
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace recall
