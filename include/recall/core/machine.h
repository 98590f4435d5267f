// Measurements shared by the benchmarks and the trainer: the machine's fp32 GEMM rate, timed in
// this process; the peak fp32 rate MFU divides by; the kernels in use; the process's peak resident
// memory.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace recall {

// GFLOP/s of a 1024^3 fp32 matrix product (2 n^3 FLOPs) on `device`, the best of `repeats` timings
// of `iters` products, on the current torch thread count. The defaults are for benchmarks; a quick
// estimate (for a progress line) can use fewer.
double measure_gemm_gflops(int iters = 10, int repeats = 3,
                           const c10::Device& device = c10::Device(c10::kCPU));

// The GEMM the trainer's matrix products run on `device`: "oneDNN dnnl_sgemm" or "MKL sgemm" when
// one was found (and RECALL_KERNELS is not reference), else torch's matmul and its library, e.g.
// "torch::matmul (OpenBLAS SkylakeX)".
std::string gemm_backend(const c10::Device& device = c10::Device(c10::kCPU));

// The kernels this process uses, one "name: value" per line (the GEMM, the fast sgemm found
// or none, the OpenBLAS core, the LibTorch version, CUDA), for --version.
std::string kernel_report();

// Whether /proc/cpuinfo lists `flag` (e.g. "avx512_bf16") among the CPU's flags.
bool cpu_has_flag(const std::string& flag);

// The CPU's theoretical fp32 rate on `threads` cores: SIMD lanes (AVX-512 16, AVX2 8, SSE 4) x 2
// FLOPs per FMA x 2 FMA units (the most a core of that ISA has, so an upper bound) x the clock
// (cpufreq's maximum, else the "@ x GHz" of the model name, else /proc/cpuinfo's MHz). 0 when the
// clock cannot be read; `how` says how it was derived.
double theoretical_fp32_flops(int threads, std::string* how = nullptr);

// The peak MFU divides by.
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
// CPU measurement is kept on disk (RECALL_CACHE_DIR, else $XDG_CACHE_HOME/recall, else
// ~/.cache/recall), keyed by CPU model, threads and library; only the highest rate seen is kept,
// and one taken while other work held the cores is taken again by the next process, until one is
// taken on idle cores. Once per process per device and thread count.
PeakFlops peak_flops(const c10::Device& device = c10::Device(c10::kCPU));

// Peak resident set size of this process so far, in MiB.
double peak_rss_mib();

// Memory this process may still take: the least of MemAvailable (/proc/meminfo) and the room left
// under its cgroup's limit (v2 memory.max - memory.current, or v1 memory.limit_in_bytes -
// memory.usage_in_bytes). `source` names the limit that decided. Unknown: INT64_MAX.
int64_t available_memory_bytes(std::string* source = nullptr);

// "--max-memory" values: bytes, or a number with K, M, G or T (powers of 1024, an optional B or
// iB), e.g. 512M, 1.5G. Throws UsageError naming `flag` and the value.
int64_t parse_memory_size(const std::string& flag, const std::string& text);

// Refuses work, before it starts, whose estimated memory `bytes` (`breakdown` says of what)
// exceeds `max_memory` when that is > 0 (the user's limit replaces the machine's), else
// available_memory_bytes(): UsageError naming `what`, the estimate, the limit and the fix.
void check_memory(const std::string& what, double bytes, const std::string& breakdown,
                  int64_t max_memory);

// Bytes in binary units for messages: "3.2 GiB".
std::string format_bytes(double bytes);

}  // namespace recall
