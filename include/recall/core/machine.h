// Measurements shared by the benchmarks: the machine's fp32 GEMM rate, timed in this process, and
// the process's peak resident memory.
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
