#include "recall/stores/theory.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

#include "recall/core/error.h"

namespace recall {

namespace {

constexpr int kNodes = 20;
constexpr double kPi = 3.14159265358979323846;

// Gauss-Legendre nodes and weights on (-1, 1), by Newton's method on P_n.
struct GaussLegendre {
  std::array<double, kNodes> x{}, w{};
  GaussLegendre() {
    for (int i = 0; i < kNodes; ++i) {
      double z = std::cos(kPi * (i + 0.75) / (kNodes + 0.5)), dp = 0;
      for (int it = 0; it < 100; ++it) {
        double p0 = 1, p1 = z;
        for (int k = 2; k <= kNodes; ++k) {
          const double p2 = ((2.0 * k - 1) * z * p1 - (k - 1.0) * p0) / k;
          p0 = p1, p1 = p2;
        }
        dp = kNodes * (z * p1 - p0) / (z * z - 1);
        const double dz = p1 / dp;
        z -= dz;
        if (std::abs(dz) < 1e-16) break;
      }
      x[i] = z;
      w[i] = 2.0 / ((1 - z * z) * dp * dp);
    }
  }
};

const GaussLegendre& gauss_legendre() {
  static const GaussLegendre gl;
  return gl;
}

// Integral of f over (a, b) in `panels` equal Gauss-Legendre panels.
double integrate(const std::function<double(double)>& f, double a, double b, int panels) {
  const auto& gl = gauss_legendre();
  const double h = (b - a) / panels;
  double total = 0;
  for (int p = 0; p < panels; ++p) {
    const double mid = a + (p + 0.5) * h;
    for (int i = 0; i < kNodes; ++i) total += gl.w[i] * f(mid + 0.5 * h * gl.x[i]);
  }
  return total * 0.5 * h;
}

void check_d(int64_t d) {
  check_arg(d >= 2, fmt::format("d_k = {}: the theory needs a key dimension >= 2", d));
}

}  // namespace

double similarity_expectation(const std::function<double(double)>& g, int64_t d, KeyLaw law) {
  check_d(d);
  constexpr int kPanels = 128;  // even: theta = pi/2 (s = 0) is a panel boundary
  if (law == KeyLaw::kSphere) {
    // The density in theta is sin^(d-2) theta: work with its log to stay finite for large d.
    const double e = static_cast<double>(d - 2);
    auto density = [e](double t) { return e == 0 ? 1.0 : std::exp(e * std::log(std::sin(t))); };
    const double z = integrate(density, 0, kPi, kPanels);
    return integrate([&](double t) { return g(std::cos(t)) * density(t); }, 0, kPi, kPanels) / z;
  }
  // Gaussian shortcut: s = z / sqrt(d), z standard normal, over |z| <= 40 (panel boundary at 0).
  const double sd = 1.0 / std::sqrt(static_cast<double>(d));
  auto f = [&](double z) { return g(z * sd) * std::exp(-0.5 * z * z) / std::sqrt(2 * kPi); };
  return integrate(f, -40, 0, kPanels) + integrate(f, 0, 40, kPanels);
}

double sphere_moment(int m, int64_t d) {
  check_d(d);
  check_arg(m >= 0, fmt::format("m = {}: the moment order must be >= 0", m));
  if (m % 2) return 0.0;
  double r = 1.0;
  for (int j = 0; j < m / 2; ++j) r *= (2.0 * j + 1) / (static_cast<double>(d) + 2.0 * j);
  return r;
}

double interference_per_memory(const WeightFunction& w, int64_t d, KeyLaw law) {
  w.validate();
  check_d(d);
  if (law == KeyLaw::kSphere) {
    if (w.kind == WeightKind::kLinear) return sphere_moment(2, d);
    if (w.kind == WeightKind::kReluPow) return 0.5 * sphere_moment(2 * w.p, d);  // sigma(1) = 1
  }
  // Softmax with s ~ N(0, 1/d): E[exp(2 beta (s - 1))] = exp(2 beta^2 / d - 2 beta) in closed form
  // (the log-normal mean). Quadrature would overflow exp(2 beta s) in the tail at large beta; this
  // only overflows to +inf (capacity 1) when the shortcut's capacity is below 1 + 1e-308.
  if (law == KeyLaw::kGaussian && w.kind == WeightKind::kSoftmax)
    return std::exp(2 * w.beta * w.beta / static_cast<double>(d) - 2 * w.beta);
  // sigma(s) / sigma(1) in a form that stays finite: softmax at large beta would overflow
  // exp(beta).
  std::function<double(double)> ratio;
  if (w.kind == WeightKind::kSoftmax) {
    ratio = [b = w.beta](double s) { return std::exp(b * (s - 1)); };
  } else {
    const double one = w(1.0);
    ratio = [w, one](double s) { return w(s) / one; };
  }
  return similarity_expectation(
      [&](double s) {
        double r = ratio(s);
        return r * r;
      },
      d, law);
}

std::optional<double> expected_isr2(const StoreSpec& spec, int64_t d, double M, KeyLaw law) {
  check_d(d);
  check_arg(M >= 1, fmt::format("M = {}: the number of memories must be >= 1", M));
  switch (spec.kind) {
    case StoreKind::kDelta:
      return std::nullopt;
    case StoreKind::kLeastSquares:
      return std::max(0.0, M / static_cast<double>(d) - 1.0);
    case StoreKind::kOuterProduct:
    case StoreKind::kWeight:
      return (M - 1) * interference_per_memory(spec.weight, d, law);
  }
  return std::nullopt;
}

std::optional<double> theory_capacity(const StoreSpec& spec, int64_t d, KeyLaw law) {
  check_d(d);
  switch (spec.kind) {
    case StoreKind::kDelta:
      return std::nullopt;
    case StoreKind::kLeastSquares:
      return 2.0 * static_cast<double>(d);
    case StoreKind::kOuterProduct:
    case StoreKind::kWeight:
      return 1.0 + 1.0 / interference_per_memory(spec.weight, d, law);
  }
  return std::nullopt;
}

}  // namespace recall
