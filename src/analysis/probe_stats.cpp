#include <algorithm>
#include <cmath>

#include "recall/analysis/probe.h"

namespace recall {

namespace {
// Percentile with linear interpolation between order statistics (numpy's default); x sorted.
double percentile(const std::vector<double>& x, double p) {
  const double pos = p * static_cast<double>(x.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, x.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  // an infinite ISR (a key whose signal weight is 0) would make inf - inf = NaN here
  if (frac == 0 || x[hi] == x[lo]) return x[lo];
  if (std::isinf(x[hi])) return x[hi];
  return x[lo] + frac * (x[hi] - x[lo]);
}
}  // namespace

IsrSummary summarize(std::vector<double> isr) {
  IsrSummary s;
  s.count = static_cast<int64_t>(isr.size());
  if (isr.empty()) return s;
  std::sort(isr.begin(), isr.end());
  double sum = 0, sum2 = 0;
  for (double x : isr) sum += x, sum2 += x * x;
  s.unread = std::count_if(isr.begin(), isr.end(), [](double x) { return std::isinf(x); });
  s.mean = sum / static_cast<double>(isr.size());
  s.rms = std::sqrt(sum2 / static_cast<double>(isr.size()));
  s.median = percentile(isr, 0.5);
  s.p10 = percentile(isr, 0.1);
  s.p90 = percentile(isr, 0.9);
  return s;
}

std::optional<double> crossing(const std::vector<int64_t>& M, const std::vector<double>& y,
                               double level, bool rising, bool log_y) {
  const auto f = [&](double v) { return log_y ? std::log(std::max(v, 1e-300)) : v; };
  for (size_t g = 1; g < M.size(); ++g) {
    const double a = y[g - 1], b = y[g];
    if (rising ? !(a < level && b >= level) : !(a >= level && b < level)) continue;
    const double x0 = std::log(static_cast<double>(M[g - 1])),
                 x1 = std::log(static_cast<double>(M[g]));
    return std::exp(x0 + (f(level) - f(a)) * (x1 - x0) / (f(b) - f(a)));
  }
  return std::nullopt;
}

}  // namespace recall
