#include "recall/core/machine.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <utility>

#include "recall/core/device.h"
#include "recall/core/error.h"
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
}  // namespace

std::string cpu_info(const std::string& key) {
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

std::filesystem::path cache_dir() {
  if (const char* d = std::getenv("RECALL_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return std::filesystem::path(d) / "recall";
  if (const char* d = std::getenv("HOME"); d && *d)
    return std::filesystem::path(d) / ".cache" / "recall";
  return {};
}

bool cpu_has_flag(const std::string& flag) {
  return (" " + cpu_info("flags") + " ").find(" " + flag + " ") != std::string::npos;
}

double theoretical_fp32_flops(int threads, std::string* how) {
  double ghz = 0;
  std::string clock;
  if (const int64_t khz = read_number("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
      khz > 0) {
    ghz = static_cast<double>(khz) / 1e6;
    clock = "cpufreq maximum";
  } else if (const std::string model = cpu_info("model name");
             model.find('@') != std::string::npos) {
    ghz = std::atof(model.c_str() + model.find('@') + 1);
    clock = "model name";
  } else if (const std::string mhz = cpu_info("cpu MHz"); !mhz.empty()) {
    ghz = std::atof(mhz.c_str()) / 1e3;
    clock = "/proc/cpuinfo MHz";
  }
  if (!(ghz > 0)) return 0;
  const std::string flags = " " + cpu_info("flags") + " ";
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

int64_t available_ram_bytes(std::string* source) {
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

int64_t parse_byte_size(const std::string& flag, const std::string& text) {
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

void check_ram(const std::string& what, double bytes, const std::string& breakdown,
               int64_t max_ram) {
  if (max_ram > 0) {
    if (bytes > static_cast<double>(max_ram))
      throw UsageError(fmt::format(
          "{} needs an estimated {} ({}), more than --max-memory {}; use smaller sizes or raise "
          "--max-memory",
          what, format_bytes(bytes), breakdown, format_bytes(static_cast<double>(max_ram))));
    return;
  }
  std::string source;
  const int64_t have = available_ram_bytes(&source);
  if (bytes > static_cast<double>(have))
    throw UsageError(fmt::format(
        "{} needs an estimated {} ({}), more than the {} this machine has free ({}); use smaller "
        "sizes (or --max-memory to set the limit yourself)",
        what, format_bytes(bytes), breakdown, format_bytes(static_cast<double>(have)), source));
}

}  // namespace recall
