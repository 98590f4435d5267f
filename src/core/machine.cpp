#include "recall/core/machine.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "recall/core/blas.h"
#include "recall/core/device.h"
#include "recall/core/error.h"
#include "recall/core/gemm.h"
#include "recall/core/kernels.h"
#include "recall/core/precision.h"
#include "recall/core/torch.h"

namespace recall {

double measure_gemm_gflops(int iters, int repeats, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  const int64_t n = 1024;
  const auto opts = torch::TensorOptions().device(device);
  // drawn on the CPU from a generator of its own: measuring must not move torch's default one,
  // which checkpoints hold
  auto gen = at::detail::createCPUGenerator(0);
  auto a = torch::randn({n, n}, gen).to(device), b = torch::randn({n, n}, gen).to(device),
       c = torch::empty({n, n}, opts);
  for (int i = 0; i < 3; ++i) torch::mm_out(c, a, b);
  synchronize(device);
  double best = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) torch::mm_out(c, a, b);
    synchronize(device);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n * iters / s / 1e9);
  }
  return best;
}

namespace {

int64_t read_number(const std::string& path);

// The value of the first /proc/cpuinfo line whose key is `key` ("" when there is none).
std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon);
    while (!k.empty() && std::isspace(static_cast<unsigned char>(k.back()))) k.pop_back();
    if (k == key) {
      const auto v = line.find_first_not_of(" \t", colon + 1);
      return v == std::string::npos ? "" : line.substr(v);
    }
  }
  return "";
}

// Fraction of the machine's CPU time that was busy over `ms` milliseconds (/proc/stat), -1 when
// unreadable.
double busy_fraction(int ms) {
  auto sample = [] {
    std::ifstream in("/proc/stat");
    std::string cpu;
    in >> cpu;
    double total = 0, idle = 0, v = 0;
    for (int i = 0; i < 8 && in >> v; ++i) {
      total += v;
      if (i == 3 || i == 4) idle += v;  // idle and iowait
    }
    return std::pair<double, double>{total, idle};
  };
  const auto a = sample();
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  const auto b = sample();
  const double total = b.first - a.first;
  return total > 0 ? 1.0 - (b.second - a.second) / total : -1.0;
}

// The highest sustained rate (FLOP/s) of fast_matmul at shapes training runs: the bench-gpt
// layers' (tokens x d_model) products and larger squares. Each shape is timed in batches of about
// 0.05 s, the best batch counting.
double measure_fast_gemm_flops(const c10::Device& device, std::string* how) {
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(0);  // torch's default generator is left alone
  struct Shape {
    int64_t m, k, n;
  };
  const Shape shapes[] = {{4096, 128, 512},
                          {4096, 512, 128},
                          {4096, 512, 2048},
                          {1024, 1024, 1024},
                          {2048, 2048, 2048}};
  double best = 0;
  std::string best_shape;
  for (const auto& sh : shapes) {
    auto a = torch::randn({sh.m, sh.k}, gen).to(device),
         b = torch::randn({sh.k, sh.n}, gen).to(device);
    const double flops = 2.0 * static_cast<double>(sh.m * sh.k * sh.n);
    auto timed = [&](int iters) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) (void)fast_matmul(a, b);
      synchronize(device);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    const double once = timed(2) / 2;  // also the warm-up
    const int iters = std::max(1, static_cast<int>(0.05 / std::max(once, 1e-6)));
    for (int rep = 0; rep < 3; ++rep) {
      const double rate = flops * iters / timed(iters);
      if (rate > best) {
        best = rate;
        best_shape = fmt::format("{}x{}x{}", sh.m, sh.k, sh.n);
      }
    }
  }
  if (how)
    *how = fmt::format("{} at {} (M x K x N), the best of 5 training shapes on {} thread{}",
                       gemm_backend(device), best_shape, at::get_num_threads(),
                       at::get_num_threads() == 1 ? "" : "s");
  return best;
}

std::filesystem::path cache_dir() {
  if (const char* d = std::getenv("RECALL_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return std::filesystem::path(d) / "recall";
  if (const char* d = std::getenv("HOME"); d && *d)
    return std::filesystem::path(d) / ".cache" / "recall";
  return {};
}

struct CachedRate {
  double flops = 0;
  bool idle = false;
  int64_t when = 0;  // seconds since the epoch
  std::string how;
};

// peak-flops.tsv: one line per key, "key<TAB>flops<TAB>idle<TAB>when<TAB>how".
std::map<std::string, CachedRate> read_rate_cache(const std::filesystem::path& file) {
  std::map<std::string, CachedRate> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, '\t');) f.push_back(x);
    if (f.size() != 5) continue;
    try {
      out[f[0]] = {std::stod(f[1]), f[2] == "1", std::stoll(f[3]), f[4]};
    } catch (const std::exception&) {  // a damaged line is measured again
    }
  }
  return out;
}

// Written whole to a temporary file and renamed, so concurrent processes never read half of it;
// a cache that cannot be written only costs a measurement next time.
void write_rate_cache(const std::filesystem::path& file,
                      const std::map<std::string, CachedRate>& rates) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  const auto tmp = file.string() + fmt::format(".{}.tmp", ::getpid());
  {
    std::ofstream out(tmp);
    for (const auto& [key, r] : rates)
      out << key << '\t' << fmt::format("{:.6e}", r.flops) << '\t' << (r.idle ? 1 : 0) << '\t'
          << r.when << '\t' << r.how << '\n';
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

// The measured peak of `device` at the current thread count, from the disk cache when a
// measurement on idle cores is there.
double measured_peak(const c10::Device& device, std::string* how) {
  if (!device.is_cpu()) return measure_fast_gemm_flops(device, how);
  const std::string key =
      fmt::format("{} | {} threads | LibTorch {} | {}", cpuinfo_field("model name"),
                  at::get_num_threads(), TORCH_VERSION, gemm_backend(device));
  const auto dir = cache_dir();
  const auto file = dir.empty() ? std::filesystem::path() : dir / "peak-flops.tsv";
  auto rates = file.empty() ? std::map<std::string, CachedRate>() : read_rate_cache(file);
  const auto now = static_cast<int64_t>(std::time(nullptr));
  const auto it = rates.find(key);
  if (it != rates.end() && it->second.idle) {
    if (how) *how = it->second.how + ", on idle cores, cached in " + file.string();
    return it->second.flops;
  }
  const double busy = busy_fraction(200);
  const bool idle = busy >= 0 && busy < 0.1;
  std::string measured_how;
  const double rate = measure_fast_gemm_flops(device, &measured_how);
  CachedRate r{rate, idle, now, measured_how};
  if (it != rates.end() && it->second.flops > rate) {
    r = it->second;  // the highest rate seen stands
    r.idle = r.idle || idle;
    r.when = now;
  }
  if (!file.empty()) {
    rates[key] = r;
    write_rate_cache(file, rates);
  }
  if (how) *how = r.how + (r.idle ? ", on idle cores" : ", on busy cores");
  return r.flops;
}

}  // namespace

std::string gemm_backend(const c10::Device& device) {
  const bool bf16 = matmul_precision() == Precision::kBf16;
  if (fast_gemm_available() && fast_kernels(device) && device.is_cpu())
    return bf16 && !bf16_gemm_name().empty() ? bf16_gemm_name() + " on " + cpu_bf16_units()
                                             : fast_gemm_name();
  const std::string autocast = bf16 ? " under bf16 autocast" : "";
  if (device.is_cpu()) return fmt::format("torch::matmul ({}){}", torch_blas_name(), autocast);
  return fmt::format("torch::matmul ({}){}", device.str(), autocast);
}

bool cpu_has_flag(const std::string& flag) {
  return (" " + cpuinfo_field("flags") + " ").find(" " + flag + " ") != std::string::npos;
}

std::string kernel_report() {
  const bool cuda = torch::cuda::is_available();
  return fmt::format(
      "gemm: {}\nfast sgemm: {}\nbf16 gemm: {}\ntorch blas: {}\nlibtorch: {}\ncuda: {}",
      gemm_backend(c10::Device(c10::kCPU)), fast_gemm_available() ? fast_gemm_name() : "not found",
      bf16_kernel_report(), torch_blas_name(), TORCH_VERSION,
      cuda ? fmt::format("available ({} devices)", torch::cuda::device_count()) : "not available");
}

double theoretical_fp32_flops(int threads, std::string* how) {
  double ghz = 0;
  std::string clock;
  if (const int64_t khz = read_number("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
      khz > 0) {
    ghz = static_cast<double>(khz) / 1e6;
    clock = "cpufreq maximum";
  } else if (const std::string model = cpuinfo_field("model name");
             model.find('@') != std::string::npos) {
    ghz = std::atof(model.c_str() + model.find('@') + 1);
    clock = "model name";
  } else if (const std::string mhz = cpuinfo_field("cpu MHz"); !mhz.empty()) {
    ghz = std::atof(mhz.c_str()) / 1e3;
    clock = "/proc/cpuinfo MHz";
  }
  if (!(ghz > 0)) return 0;
  const std::string flags = " " + cpuinfo_field("flags") + " ";
  auto has = [&](const char* f) { return flags.find(fmt::format(" {} ", f)) != std::string::npos; };
  int lanes = 4, per_lane = 2;  // SSE: a multiply and an add each cycle
  std::string isa = "SSE";
  if (has("avx512f")) {
    lanes = 16, per_lane = 4, isa = "AVX-512";
  } else if (has("avx2") && has("fma")) {
    lanes = 8, per_lane = 4, isa = "AVX2+FMA";
  } else if (has("avx")) {
    lanes = 8, isa = "AVX";
  }
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  const int cores =
      std::max(1, std::min<int>(threads, online > 0 ? static_cast<int>(online) : threads));
  if (how)
    *how = fmt::format("{} cores x {:.2f} GHz ({}) x {} FLOPs/cycle ({}{})", cores, ghz, clock,
                       lanes * per_lane, isa, per_lane == 4 ? ", 2 FMA units" : "");
  return cores * ghz * 1e9 * lanes * per_lane;
}

std::string PeakFlops::describe() const {
  auto g = [](double f) { return fmt::format("{:.1f} GFLOP/s", f / 1e9); };
  std::string s = fmt::format("peak {}, {}", g(flops), kind);
  s += fmt::format(" (measured {}: {}", g(measured), measured_how);
  s += theoretical > 0 ? fmt::format("; theoretical {}: {})", g(theoretical), theoretical_how)
                       : std::string("; theoretical: the clock is unreadable)");
  return s;
}

PeakFlops peak_flops(const c10::Device& device) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, PeakFlops> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = known.try_emplace({device.str(), at::get_num_threads()});
  if (!fresh) return it->second;
  PeakFlops& p = it->second;
  p.measured = measured_peak(device, &p.measured_how);
  if (device.is_cpu())
    p.theoretical = theoretical_fp32_flops(at::get_num_threads(), &p.theoretical_how);
  p.kind = p.theoretical >= p.measured ? "theoretical" : "measured";
  p.flops = std::max(p.theoretical, p.measured);
  return p;
}

double peak_rss_mib() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

namespace {

// The first number in a file, or -1 when it is missing or not a number ("max").
int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  int64_t v = -1;
  if (!(in >> v)) return -1;
  return v;
}

// The cgroup folder of this process under `mount` for the v1 controller `controller` ("" for v2).
std::string cgroup_dir(const std::string& mount, const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {  // id:controllers:path
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctrls = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    const bool match = controller.empty()
                           ? ctrls.empty()
                           : ("," + ctrls + ",").find("," + controller + ",") != std::string::npos;
    if (match) return mount + path;
  }
  return "";
}

}  // namespace

int64_t available_memory_bytes(std::string* source) {
  int64_t best = std::numeric_limits<int64_t>::max();
  std::string why = "unknown";
  {
    std::ifstream in("/proc/meminfo");
    std::string key;
    int64_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit)
      if (key == "MemAvailable:") {
        best = kib * 1024;
        why = "MemAvailable";
        break;
      }
  }
  auto limit = [&](const std::string& dir, const char* max_file, const char* used_file,
                   const char* name) {
    if (dir.empty()) return;
    const int64_t max = read_number(dir + "/" + max_file),
                  used = read_number(dir + "/" + used_file);
    // v1 reports "no limit" as a huge page-rounded number
    if (max <= 0 || max >= (int64_t{1} << 60)) return;
    const int64_t room = std::max<int64_t>(0, max - std::max<int64_t>(used, 0));
    if (room < best) {
      best = room;
      why = name;
    }
  };
  limit(cgroup_dir("/sys/fs/cgroup", ""), "memory.max", "memory.current", "cgroup memory.max");
  limit(cgroup_dir("/sys/fs/cgroup/memory", "memory"), "memory.limit_in_bytes",
        "memory.usage_in_bytes", "cgroup memory.limit_in_bytes");
  if (source) *source = why;
  return best;
}

int64_t parse_memory_size(const std::string& flag, const std::string& text) {
  std::istringstream in(text);
  double v = 0;
  std::string unit;
  const bool ok = static_cast<bool>(in >> v) && std::isfinite(v) && v > 0;
  if (ok) in >> unit;
  std::string rest;
  in >> rest;
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  static const std::pair<const char*, double> units[] = {{"", 1},
                                                         {"B", 1},
                                                         {"K", 1024.0},
                                                         {"KB", 1024.0},
                                                         {"KIB", 1024.0},
                                                         {"M", 1048576.0},
                                                         {"MB", 1048576.0},
                                                         {"MIB", 1048576.0},
                                                         {"G", 1073741824.0},
                                                         {"GB", 1073741824.0},
                                                         {"GIB", 1073741824.0},
                                                         {"T", 1099511627776.0},
                                                         {"TB", 1099511627776.0},
                                                         {"TIB", 1099511627776.0}};
  for (const auto& [name, scale] : units)
    if (ok && rest.empty() && unit == name && v * scale >= 1 && v * scale < 9.2e18)
      return static_cast<int64_t>(v * scale);
  throw UsageError(
      fmt::format("{} {}: give a size such as 512M or 4G (bytes, or K, M, G, T)", flag, text));
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  return fmt::format(fmt::runtime(u == 0 ? "{:.0f} {}" : "{:.1f} {}"), bytes, units[u]);
}

void check_memory(const std::string& what, double bytes, const std::string& breakdown,
                  int64_t max_memory) {
  if (max_memory > 0) {
    if (bytes > static_cast<double>(max_memory))
      throw UsageError(fmt::format(
          "{} needs an estimated {} ({}), more than --max-memory {}; use smaller sizes or raise "
          "--max-memory",
          what, format_bytes(bytes), breakdown, format_bytes(static_cast<double>(max_memory))));
    return;
  }
  std::string source;
  const int64_t have = available_memory_bytes(&source);
  if (bytes > static_cast<double>(have))
    throw UsageError(fmt::format(
        "{} needs an estimated {} ({}), more than the {} this machine has free ({}); use smaller "
        "sizes (or --max-memory to set the limit yourself)",
        what, format_bytes(bytes), breakdown, format_bytes(static_cast<double>(have)), source));
}

}  // namespace recall
