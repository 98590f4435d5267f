// Which kernels the fast paths run. Every fast path of the library (the GEMMs and fused linear
// layers, causal attention, LayerNorm, RMSNorm, the loss, the fused AdamW step, the data-parallel
// backward) asks reference_kernels() and, when it is true, runs its plain torch-ops reference
// instead, so that a whole training run can be compared against torch's own ops. The environment
// variable RECALL_KERNELS (`fast`, the default, or `reference`) is read once; tests override it in
// scope.
//
// The fast paths are CPU code: on any other device (CUDA) each runs its torch-ops reference, the
// same code that RECALL_KERNELS=reference runs on the CPU. fast_kernels(device) is the one test.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

namespace recall {

enum class Kernels { kFast, kReference };

// The kernels named by RECALL_KERNELS (unset or empty: fast). Throws UsageError naming the value
// and the accepted ones when it is anything else.
Kernels kernels_from_environment();

// True when the fast paths must run their torch-ops references: a ScopedKernels override if one
// is alive, else RECALL_KERNELS (read on the first call; a bad value counts as fast here, the CLI
// refuses it at start through kernels_from_environment()).
bool reference_kernels();

// True when the fast paths may run on tensors of `device`: a CPU device and no reference override.
// Under false every fast path runs its torch-ops reference (what it runs on CUDA), the
// data-parallel step runs one backward over the whole batch, and the optimizer is torch's AdamW.
inline bool fast_kernels(const c10::Device& device) {
  return device.is_cpu() && !reference_kernels();
}

// The fused kernels. Each counts its calls (in this process, on every thread), so that a test of
// a fast path fails when the fast path did not run, and a rerun under RECALL_KERNELS=reference
// when one did (tests/main.cpp).
//   sgemm          the fast sgemm (recall/ops/gemm.h), one count per product
//   bf16_gemm      the bf16 GEMM under precision bf16 (recall/ops/precision.h), per product
//   attention      the fused causal attention (recall/ops/causal_attention.h), per call
//   layer_norm     the fused LayerNorm (recall/models/norm.h), per forward
//   adamw          the fused AdamW step (recall/ops/fused_adamw.h), per step
//   probe_tile     the probe's fused similarity tiles (recall/analysis/probe_fused.h), per trial
//   data_parallel  the data-parallel step over several workers (recall/train/data_parallel.h)
//   cross_entropy  the fused training loss (recall/ops/cross_entropy.h), per forward
//   rms_norm       the fused RMSNorm (recall/ops/layer_norm.h), per forward
enum class FastKernel {
  kSgemm,
  kBf16Gemm,
  kAttention,
  kLayerNorm,
  kAdamW,
  kProbeTile,
  kDataParallel,
  kBf16AsFloat,   // an sgemm of operands holding bf16 values as float32 (the attention's blocks)
  kCrossEntropy,  // the fused training loss (recall/ops/cross_entropy.h), per forward
  kRmsNorm        // the fused RMSNorm (recall/ops/layer_norm.h), per forward
};
std::string to_string(FastKernel k);
std::vector<FastKernel> all_fast_kernels();
void count_fast_call(FastKernel k);
int64_t fast_calls(FastKernel k);

// The kernels this process uses, one "name: value" per line (the GEMM, the fast sgemm found
// or none, the bf16 GEMM, the BLAS behind torch, the LibTorch version, CUDA), for --version.
std::string kernel_report();

// Overrides the environment for its lifetime, on every thread (the data-parallel workers too).
// Not nestable across threads: meant for tests.
class ScopedKernels {
 public:
  explicit ScopedKernels(Kernels kernels);
  ~ScopedKernels();
  ScopedKernels(const ScopedKernels&) = delete;
  ScopedKernels& operator=(const ScopedKernels&) = delete;

 private:
  int previous_;
};

}  // namespace recall
