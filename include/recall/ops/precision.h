// The precision of the model's matrix products, one setting for the process (training, evaluation,
// sampling; the data-parallel workers see it too).
//   fp32  every product in float32 (the default).
//   bf16  the fast GEMMs (recall/ops/gemm.h: fast_matmul, fast_linear, the fused attention's
//         products) round both operands to bfloat16 (8-bit mantissa, round to nearest even) and
//         accumulate in float32 (oneDNN's dnnl_gemm_bf16bf16f32 or MKL's cblas_gemm_bf16bf16f32,
//         on AMX or AVX512-BF16). Master weights, optimizer state, norms, softmax and the loss stay
//         float32, and so do checkpoints and exports. Where the fast paths do not run (CUDA,
//         RECALL_KERNELS=reference) the same products run under LibTorch's autocast
//         (AutocastScope).
// bf16 on a CPU without bf16 instructions is refused rather than emulated (it would be slower
// than fp32, and pass for the fast path).
#pragma once
#include <c10/core/Device.h>

#include <memory>
#include <string>

namespace recall {

enum class Precision { kFp32, kBf16 };
std::string to_string(Precision v);
// Throws std::invalid_argument naming the value and the accepted names.
Precision precision_from_string(const std::string& s);

// The process's precision (fp32 unless a ScopedPrecision is alive).
Precision matmul_precision();

// The CPU's bf16 matrix instructions ("AMX", "AVX512-BF16", or "" for none: /proc/cpuinfo's
// amx_bf16 and avx512_bf16 flags).
std::string cpu_bf16_units();

// What bf16 products run on here, for --version and bench: e.g. "oneDNN dnnl_gemm_bf16bf16f32 on
// AVX512-BF16", or "none (...why...)".
std::string bf16_kernel_report();

// Throws UsageError (one line, naming `flag` and the fix) when `p` cannot run on `device` here:
// bf16 on a CPU without bf16 instructions or without a bf16 GEMM in the process.
void check_precision(Precision p, const c10::Device& device, const std::string& flag);

// Sets the process's precision for its lifetime, on every thread (checked by the caller).
class ScopedPrecision {
 public:
  explicit ScopedPrecision(Precision p);
  ~ScopedPrecision();
  ScopedPrecision(const ScopedPrecision&) = delete;
  ScopedPrecision& operator=(const ScopedPrecision&) = delete;

 private:
  Precision previous_;
};

// LibTorch's autocast to bfloat16 for `device`'s type while alive, when the precision is bf16 and
// the fast kernels do not run on `device` (recall/ops/kernels.h); nothing otherwise. Scoped to a
// forward pass (and its loss): the backward follows the types the forward recorded.
class AutocastScope {
 public:
  explicit AutocastScope(const c10::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  bool previous_ = false;
  c10::DeviceType type_ = c10::DeviceType::CPU;
};

}  // namespace recall
