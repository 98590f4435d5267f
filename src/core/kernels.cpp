#include "recall/core/kernels.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>

#include "recall/core/error.h"

namespace recall {
namespace {

// -1: follow the environment; otherwise the Kernels value of the active override.
std::atomic<int> g_override{-1};

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

ScopedKernels::ScopedKernels(Kernels kernels)
    : previous_(g_override.exchange(static_cast<int>(kernels))) {}

ScopedKernels::~ScopedKernels() {
  g_override.store(previous_);
}

}  // namespace recall
