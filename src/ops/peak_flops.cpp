#include "recall/ops/peak_flops.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <vector>

#include "recall/core/device.h"
#include "recall/core/machine.h"
#include "recall/ops/gemm.h"
#include "recall/ops/precision.h"

namespace recall {

namespace {

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
  const std::string key = fmt::format("{} | {} threads | LibTorch {} | {}", cpu_info("model name"),
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
  static std::map<std::tuple<std::string, int, std::string>, PeakFlops> known;
  std::lock_guard<std::mutex> lock(mutex);
  // the GEMM names the precision: a bf16 run's peak is its bf16 GEMM's
  auto [it, fresh] = known.try_emplace({device.str(), at::get_num_threads(), gemm_backend(device)});
  if (!fresh) return it->second;
  PeakFlops& p = it->second;
  p.measured = measured_peak(device, &p.measured_how);
  if (device.is_cpu())
    p.theoretical = theoretical_fp32_flops(at::get_num_threads(), &p.theoretical_how);
  p.kind = p.theoretical >= p.measured ? "theoretical" : "measured";
  p.flops = std::max(p.theoretical, p.measured);
  return p;
}

std::string bf16_slower_note(double bf16_flops, double fp32_flops) {
  if (bf16_flops >= fp32_flops) return "";
  return fmt::format(
      "precision bf16: this CPU's bf16 GEMM runs at {:.0f} GFLOP/s at the trainer's shapes, its "
      "fp32 sgemm at {:.0f}: precision fp32 trains faster here (bf16 pays where AMX runs it)",
      bf16_flops / 1e9, fp32_flops / 1e9);
}

std::string bf16_slower_note(const c10::Device& device) {
  if (!device.is_cpu() || matmul_precision() != Precision::kBf16) return "";
  const double bf16 = peak_flops(device).measured;
  const ScopedPrecision fp32(Precision::kFp32);
  return bf16_slower_note(bf16, peak_flops(device).measured);
}

}  // namespace recall
