// The peak that MFU divides by: the larger of the CPU's theoretical fp32 rate
// (recall/core/machine.h) and the highest sustained rate of recall's own GEMM (fast_matmul,
// recall/ops/gemm.h) at the trainer's shapes, under the process's precision.
#pragma once
#include <c10/core/Device.h>

#include <string>

namespace recall {

struct PeakFlops {
  double flops = 0;        // per second, the larger of the two below
  std::string kind;        // "measured" or "theoretical": which one it is
  double measured = 0;     // the highest sustained rate of the trainer's GEMM at its shapes
  double theoretical = 0;  // theoretical_fp32_flops, 0 when unknown
  std::string measured_how, theoretical_how;
  // One line: "peak 312.4 GFLOP/s (measured: ...; theoretical 294.4 GFLOP/s: ...)".
  std::string describe() const;
};

// The peak on `device` at torch's current thread count: the larger of the theoretical rate and the
// highest sustained rate of the very GEMM the trainer calls (fast_matmul) at training shapes. A
// CPU measurement is kept on disk (cache_dir(), recall/core/machine.h), keyed by CPU model, threads
// and library; only the highest rate seen is kept, and one taken while other work held the cores
// is taken again by the next process, until one is taken on idle cores. Once per process per
// device and thread count.
PeakFlops peak_flops(const c10::Device& device = c10::Device(c10::kCPU));

// Under precision bf16 on a CPU whose bf16 GEMM is slower than its fp32 sgemm at the trainer's
// shapes (AVX512-BF16 without AMX: its dot product issues at the rate of fp32's FMAs), one line
// naming both measured rates and that fp32 trains faster here; "" otherwise. Measures the fp32
// rate once (cached as the peak is).
std::string bf16_slower_note(const c10::Device& device = c10::Device(c10::kCPU));
// The line for these two measured rates (FLOP/s), "" when bf16's is the higher.
std::string bf16_slower_note(double bf16_flops, double fp32_flops);

}  // namespace recall
