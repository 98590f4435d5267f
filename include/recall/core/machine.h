// What the machine is and has: its CPU (/proc/cpuinfo, its theoretical fp32 rate), how busy it is,
// LibTorch's own fp32 GEMM rate timed in this process, the process's peak resident memory, the RAM
// it may still take and the check of an estimate against it, and the folder recall caches
// measurements in. The peak that MFU divides by, which times recall's own kernels, is
// recall/ops/peak_flops.h.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace recall {

// GFLOP/s of a 1024^3 fp32 matrix product (2 n^3 FLOPs) on `device`, the best of `repeats` timings
// of `iters` products, on the current torch thread count. The defaults are for benchmarks; a quick
// estimate (for a progress line) can use fewer.
double measure_gemm_gflops(int iters = 10, int repeats = 3,
                           const c10::Device& device = c10::Device(c10::kCPU));

// The value of the first /proc/cpuinfo line whose key is `key` (e.g. "model name"), "" when there
// is none.
std::string cpu_info(const std::string& key);

// Fraction of the machine's CPU time that was busy over `ms` milliseconds (/proc/stat), -1 when
// unreadable.
double busy_fraction(int ms);

// Where recall caches measurements across processes: RECALL_CACHE_DIR, else
// $XDG_CACHE_HOME/recall, else ~/.cache/recall; empty when none of them is set.
std::filesystem::path cache_dir();

// Whether /proc/cpuinfo lists `flag` (e.g. "avx512_bf16") among the CPU's flags.
bool cpu_has_flag(const std::string& flag);

// The CPU's theoretical fp32 rate on `threads` cores: SIMD lanes (AVX-512 16, AVX2 8, SSE 4) x 2
// FLOPs per FMA x 2 FMA units (the most a core of that ISA has, so an upper bound) x the clock
// (cpufreq's maximum, else the "@ x GHz" of the model name, else /proc/cpuinfo's MHz). 0 when the
// clock cannot be read; `how` says how it was derived.
double theoretical_fp32_flops(int threads, std::string* how = nullptr);

// Peak resident set size of this process so far, in MiB.
double peak_rss_mib();

// Memory this process may still take: the least of MemAvailable (/proc/meminfo) and the room left
// under its cgroup's limit (v2 memory.max - memory.current, or v1 memory.limit_in_bytes -
// memory.usage_in_bytes). `source` names the limit that decided. Unknown: INT64_MAX.
int64_t available_ram_bytes(std::string* source = nullptr);

// "--max-memory" values: bytes, or a number with K, M, G or T (powers of 1024, an optional B or
// iB), e.g. 512M, 1.5G. Throws UsageError naming `flag` and the value.
int64_t parse_byte_size(const std::string& flag, const std::string& text);

// Refuses work, before it starts, whose estimated RAM `bytes` (`breakdown` says of what)
// exceeds `max_ram` when that is > 0 (the user's limit replaces the machine's), else
// available_ram_bytes(): UsageError naming `what`, the estimate, the limit and the fix.
void check_ram(const std::string& what, double bytes, const std::string& breakdown,
               int64_t max_ram);

// Bytes in binary units for messages: "3.2 GiB".
std::string format_bytes(double bytes);

}  // namespace recall
