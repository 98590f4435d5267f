#include "recall/ops/kernels.h"

#include <fmt/format.h>
#include <torch/version.h>

#include <array>
#include <atomic>
#include <cstdlib>

#include "recall/core/enum_names.h"
#include "recall/core/error.h"
#include "recall/core/torch.h"
#include "recall/ops/blas.h"
#include "recall/ops/gemm.h"
#include "recall/ops/precision.h"

namespace recall {
namespace {

// -1: follow the environment; otherwise the Kernels value of the active override.
std::atomic<int> g_override{-1};

constexpr std::array<const char*, 10> kFastKernelNames = {
    "sgemm",      "bf16_gemm",     "attention",     "layer_norm",    "adamw",
    "probe_tile", "data_parallel", "bf16_as_float", "cross_entropy", "rms_norm"};
// An enum value added without its name would leave a null here, which the array's size hides.
static_assert([] {
  for (const char* name : kFastKernelNames)
    if (name == nullptr) return false;
  return true;
}());
std::array<std::atomic<int64_t>, kFastKernelNames.size()> g_calls{};

}  // namespace

Kernels kernels_from_environment() {
  const char* value = std::getenv("RECALL_KERNELS");
  const std::string v = value ? value : "";
  if (v.empty() || v == "fast") return Kernels::kFast;
  if (v == "reference") return Kernels::kReference;
  throw UsageError(
      fmt::format("RECALL_KERNELS = '{}': must be fast (the default) or reference", v));
}

bool reference_kernels() {
  static const bool from_env = [] {
    try {
      return kernels_from_environment() == Kernels::kReference;
    } catch (const UsageError&) {
      return false;
    }
  }();
  const int o = g_override.load(std::memory_order_relaxed);
  return o < 0 ? from_env : o == static_cast<int>(Kernels::kReference);
}

std::string to_string(FastKernel k) {
  return enum_name(kFastKernelNames, k);
}

std::vector<FastKernel> all_fast_kernels() {
  return enum_values<FastKernel>(kFastKernelNames);
}

void count_fast_call(FastKernel k) {
  g_calls[static_cast<size_t>(k)].fetch_add(1, std::memory_order_relaxed);
}

int64_t fast_calls(FastKernel k) {
  return g_calls[static_cast<size_t>(k)].load(std::memory_order_relaxed);
}

ScopedKernels::ScopedKernels(Kernels kernels)
    : previous_(g_override.exchange(static_cast<int>(kernels))) {}

ScopedKernels::~ScopedKernels() {
  g_override.store(previous_);
}

std::string kernel_report() {
  const bool cuda = torch::cuda::is_available();
  return fmt::format(
      "gemm: {}\nfast sgemm: {}\nbf16 gemm: {}\ntorch blas: {}\nlibtorch: {}\ncuda: {}",
      gemm_backend(c10::Device(c10::kCPU)), fast_gemm_available() ? fast_gemm_name() : "not found",
      bf16_kernel_report(), torch_blas_name(), TORCH_VERSION,
      cuda ? fmt::format("available ({} devices)", torch::cuda::device_count()) : "not available");
}
}  // namespace recall
