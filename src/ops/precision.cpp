#include "recall/ops/precision.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <array>
#include <atomic>

#include "recall/core/enum_names.h"
#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/ops/gemm.h"
#include "recall/ops/kernels.h"

namespace recall {
namespace {

constexpr std::array<const char*, 2> kPrecisionNames = {"fp32", "bf16"};
std::atomic<int> g_precision{static_cast<int>(Precision::kFp32)};

// LibTorch 2.4 moved autocast's switches to one function per device type.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool autocast_enabled(c10::DeviceType t) {
  return at::autocast::is_autocast_enabled(t);
}
void enable_autocast(c10::DeviceType t, bool on) {
  at::autocast::set_autocast_dtype(t, at::kBFloat16);
  at::autocast::set_autocast_enabled(t, on);
}
#else
bool autocast_enabled(c10::DeviceType t) {
  return t == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
}
void enable_autocast(c10::DeviceType t, bool on) {
  if (t == c10::DeviceType::CPU) {
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(on);
  } else {
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(on);
  }
}
#endif

}  // namespace

std::string to_string(Precision v) {
  return enum_name(kPrecisionNames, v);
}
Precision precision_from_string(const std::string& s) {
  return enum_from_name<Precision>(kPrecisionNames, s, "precision");
}

Precision matmul_precision() {
  return static_cast<Precision>(g_precision.load(std::memory_order_relaxed));
}

std::string cpu_bf16_units() {
  if (cpu_has_flag("amx_bf16")) return "AMX";
  if (cpu_has_flag("avx512_bf16")) return "AVX512-BF16";
  return "";
}

std::string bf16_kernel_report() {
  const std::string units = cpu_bf16_units(), gemm = bf16_gemm_name();
  if (units.empty()) return "none (this CPU has no bf16 instructions: avx512_bf16 or amx_bf16)";
  if (gemm.empty()) return "none (no bf16 GEMM in this LibTorch: oneDNN's or MKL's)";
  return fmt::format("{} on {}", gemm, units);
}

void check_precision(Precision p, const c10::Device& device, const std::string& flag) {
  if (p == Precision::kFp32 || !device.is_cpu()) return;
  if (cpu_bf16_units().empty())
    throw UsageError(fmt::format(
        "{} bf16: this CPU has no bf16 instructions (avx512_bf16 or amx_bf16), where bf16 would "
        "run slower than fp32; use fp32",
        flag));
  if (fast_kernels(device) && bf16_gemm_name().empty())
    throw UsageError(fmt::format(
        "{} bf16: this LibTorch has no bf16 GEMM (oneDNN's dnnl_gemm_bf16bf16f32 or MKL's "
        "cblas_gemm_bf16bf16f32); use fp32",
        flag));
}

ScopedPrecision::ScopedPrecision(Precision p)
    : previous_(static_cast<Precision>(g_precision.exchange(static_cast<int>(p)))) {}

ScopedPrecision::~ScopedPrecision() {
  g_precision.store(static_cast<int>(previous_));
}

AutocastScope::AutocastScope(const c10::Device& device) : type_(device.type()) {
  if (matmul_precision() != Precision::kBf16 || fast_kernels(device)) return;
  active_ = true;
  previous_ = autocast_enabled(type_);
  enable_autocast(type_, true);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The outermost scope drops the casts of the weights it cached, as torch.autocast does.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  enable_autocast(type_, previous_);
}

}  // namespace recall
