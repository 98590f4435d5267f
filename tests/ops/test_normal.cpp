// The fast normal stream against its scalar reference, and its distribution against the standard
// normal's (moments, the Kolmogorov-Smirnov distance, correlations between neighbours and seeds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "recall/ops/kernels.h"
#include "recall/ops/normal.h"

namespace recall {
namespace {

std::vector<float> draw(int64_t n, uint64_t seed) {
  std::vector<float> x(static_cast<size_t>(n));
  fill_normal(x.data(), n, seed);
  return x;
}

TEST(Normal, FastStreamMatchesTheReferenceWithin1e5) {
  for (int64_t n : {1, 31, 32, 33, 1000, 100000}) {
    std::vector<float> want(static_cast<size_t>(n));
    fill_normal_reference(want.data(), n, 7);
    const auto got = draw(n, 7);
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]));
    EXPECT_LT(worst, 1e-5) << n;
  }
  // a draw is the prefix of a longer one
  const auto a = draw(45, 3), b = draw(1000, 3);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
}

TEST(Normal, ReferenceKernelsSwitchSelectsTheReference) {
  ScopedKernels reference(Kernels::kReference);
  std::vector<float> want(777);
  fill_normal_reference(want.data(), 777, 11);
  EXPECT_EQ(draw(777, 11), want);
}

// Phi(x) = (1 + erf(x / sqrt 2)) / 2
double normal_cdf(double x) {
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
}

TEST(Normal, StreamIsStandardNormal) {
  const int64_t n = 1 << 20;
  const auto x = draw(n, 12345);
  double mean = 0, m2 = 0, m4 = 0;
  for (float v : x) mean += v / double(n);
  for (float v : x) {
    const double d = v - mean;
    m2 += d * d / double(n);
    m4 += d * d * d * d / double(n);
  }
  const double se = 1.0 / std::sqrt(double(n));
  EXPECT_LT(std::abs(mean), 5 * se);                       // sd of the mean: 1 / sqrt(n)
  EXPECT_LT(std::abs(m2 - 1.0), 5 * std::sqrt(2.0) * se);  // sd of the variance: sqrt(2 / n)
  EXPECT_LT(std::abs(m4 / (m2 * m2) - 3.0), 5 * std::sqrt(24.0) * se);  // kurtosis: sqrt(24 / n)
  // Kolmogorov-Smirnov: sup |F_n - Phi| < 1.95 / sqrt(n) at the 0.1 % level
  auto sorted = x;
  std::sort(sorted.begin(), sorted.end());
  double ks = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double f = normal_cdf(sorted[i]);
    ks = std::max({ks, std::abs(f - double(i) / n), std::abs(f - double(i + 1) / n)});
  }
  EXPECT_LT(ks, 1.95 * se);
  EXPECT_LE(*std::max_element(x.begin(), x.end()), 5.6f);  // U >= 2^-24
}

// Correlation of x[i] and y[i + lag] over the overlap.
double correlation(const std::vector<float>& x, const std::vector<float>& y, size_t lag) {
  double s = 0;
  const size_t n = x.size() - lag;
  for (size_t i = 0; i < n; ++i) s += double(x[i]) * y[i + lag];
  return s / double(n);
}

TEST(Normal, NeighboursLanesAndSeedsAreUncorrelated) {
  const int64_t n = 1 << 20;
  const auto x = draw(n, 1), y = draw(n, 2);
  const double bound = 5.0 / std::sqrt(double(n));
  // lag 16: the cosine and sine of one pair; 32: the next word of the same lane
  for (size_t lag : {1, 15, 16, 17, 32, 64}) EXPECT_LT(std::abs(correlation(x, x, lag)), bound);
  EXPECT_LT(std::abs(correlation(x, y, 0)), bound);
  // squares: Box-Muller's r is shared by z_l and z_{16 + l}, yet their squares are independent
  std::vector<float> sq(x.size());
  std::transform(x.begin(), x.end(), sq.begin(), [](float v) { return v * v - 1.0f; });
  EXPECT_LT(std::abs(correlation(sq, sq, 16)) / std::sqrt(2.0), bound);
}

}  // namespace
}  // namespace recall
