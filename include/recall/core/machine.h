// Measurements shared by the benchmarks: the machine's fp32 GEMM rate, timed in this process, and
// the process's peak resident memory.
#pragma once
#include <c10/core/Device.h>

namespace recall {

// GFLOP/s of a 1024^3 fp32 matrix product (2 n^3 FLOPs) on `device`, the best of `repeats` timings
// of `iters` products, on the current torch thread count. The defaults are for benchmarks; a quick
// estimate (for a progress line) can use fewer.
double measure_gemm_gflops(int iters = 10, int repeats = 3,
                           const c10::Device& device = c10::Device(c10::kCPU));

// Peak resident set size of this process so far, in MiB.
double peak_rss_mib();

}  // namespace recall
