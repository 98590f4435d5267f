// Quadrature against closed forms, the essay's Gaussian shortcut, and Monte Carlo against theory.
#include <gtest/gtest.h>

#include <cmath>

#include "recall/stores/store.h"
#include "recall/stores/theory.h"

using namespace recall;

TEST(Theory, QuadratureMatchesClosedFormMoments) {
  for (int64_t d : {2, 3, 8, 64, 256, 1024}) {
    auto pow_m = [](int m) { return [m](double s) { return std::pow(s, m); }; };
    EXPECT_NEAR(similarity_expectation(pow_m(2), d) * d, 1.0, 1e-6) << d;  // 1/d
    EXPECT_NEAR(similarity_expectation(pow_m(4), d) / (3.0 / (d * (d + 2.0))), 1.0, 1e-6) << d;
    EXPECT_NEAR(similarity_expectation(pow_m(6), d) / sphere_moment(6, d), 1.0, 1e-6) << d;
    EXPECT_NEAR(similarity_expectation([](double) { return 1.0; }, d), 1.0, 1e-12);
    for (int p : {1, 2, 3, 4}) {  // relu^p: E[relu(s)^2p] = E[s^2p] / 2, through the kink at 0
      auto relu_p2 = [p](double s) { return s > 0 ? std::pow(s, 2 * p) : 0.0; };
      EXPECT_NEAR(similarity_expectation(relu_p2, d) / (0.5 * sphere_moment(2 * p, d)), 1.0, 1e-6)
          << "d " << d << " p " << p;
    }
  }
  EXPECT_DOUBLE_EQ(sphere_moment(4, 64), 3.0 / (64 * 66));
  EXPECT_DOUBLE_EQ(sphere_moment(5, 64), 0.0);
}

TEST(Theory, ClosedFormCapacities) {
  const int64_t d = 64;
  EXPECT_NEAR(*theory_capacity(StoreSpec::parse("outer_product"), d), 1.0 + d, 1e-9);
  EXPECT_NEAR(*theory_capacity(StoreSpec::parse("relu"), d), 1.0 + 2.0 * d, 1e-9);
  EXPECT_NEAR(*theory_capacity(StoreSpec::parse("relu2"), d), 1.0 + 2.0 * d * (d + 2) / 3.0, 1e-6);
  EXPECT_DOUBLE_EQ(*theory_capacity(StoreSpec::parse("least_squares"), d), 2.0 * d);
  // exp2 = 1 + beta s: sigma(1)^2 = (1 + beta)^2, E[sigma^2] = 1 + beta^2 / d.
  EXPECT_NEAR(*theory_capacity(StoreSpec::parse("exp2", 8), d), 1.0 + 81.0 / 2.0, 1e-8);
  // exp3: E[(1 + bs + b^2 s^2/2)^2] = 1 + 2 b^2 E[s^2] + b^4 E[s^4] / 4
  const double e3 = 1 + 2 * 64.0 / d + 4096.0 * 3.0 / (d * (d + 2.0)) / 4.0;
  EXPECT_NEAR(*theory_capacity(StoreSpec::parse("exp3", 8), d), 1.0 + 41.0 * 41.0 / e3, 1e-6);
  EXPECT_FALSE(theory_capacity(StoreSpec::parse("delta"), d).has_value());
  // Least squares: E[ISR^2] = M/d - 1 above d, 0 below.
  EXPECT_DOUBLE_EQ(*expected_isr2(StoreSpec::parse("least_squares"), d, 32), 0.0);
  EXPECT_DOUBLE_EQ(*expected_isr2(StoreSpec::parse("least_squares"), d, 192), 2.0);
}

TEST(Theory, GaussianShortcutGivesTheEssaysFormulas) {
  const int64_t d = 64;
  const auto g = KeyLaw::kGaussian;
  EXPECT_NEAR(*theory_capacity(StoreSpec::parse("outer_product"), d, g), 1.0 + d, 1e-6);
  EXPECT_NEAR(*theory_capacity(StoreSpec::parse("relu"), d, g), 1.0 + 2.0 * d, 1e-6);
  EXPECT_NEAR(*theory_capacity(StoreSpec::parse("relu2"), d, g) / (1.0 + d * d / 1.5), 1.0, 1e-9);
  const double softmax = 1.0 + std::exp(2 * 8.0 - 2 * 64.0 / d);  // e^(2 beta - 2 beta^2 / d)
  EXPECT_NEAR(*theory_capacity(StoreSpec::parse("softmax", 8), d, g) / softmax, 1.0, 1e-9);
  // The closed form that theory uses for softmax under the shortcut, against quadrature.
  const double quad = similarity_expectation([](double s) { return std::exp(2 * 8.0 * (s - 1)); },
                                             d, KeyLaw::kGaussian);
  EXPECT_NEAR(quad * (softmax - 1.0), 1.0, 1e-9);
  // The sphere (exact for unit keys) and the shortcut differ by a few per cent.
  const double sphere = *theory_capacity(StoreSpec::parse("softmax", 8), d);
  EXPECT_GT(sphere / softmax, 1.02);
  EXPECT_LT(sphere / softmax, 1.10);
}

TEST(Theory, LargeBetaStaysFinite) {
  // exp(2 beta s) overflows a double in the shortcut's Gaussian tail from beta ~ 45 at d = 64;
  // the capacities stay finite (the shortcut's falls to 1: its keys are not bounded).
  for (double beta : {50.0, 200.0, 1000.0}) {
    for (auto law : {KeyLaw::kSphere, KeyLaw::kGaussian}) {
      const auto c = theory_capacity(StoreSpec::parse("softmax", beta), 64, law);
      ASSERT_TRUE(c.has_value());
      EXPECT_TRUE(std::isfinite(*c)) << beta;
      EXPECT_GE(*c, 1.0) << beta;
    }
  }
}

TEST(Theory, MonteCarloMeanIsr2WithinThreeStandardErrors) {
  // Independent trials of one query each: ISR^2 of a stored key against theory (M - 1) E[sigma^2] /
  // sigma(1)^2. 400 trials per store; the bound is 3 standard errors of the sample mean.
  const int64_t d = 32, M = 96, trials = 400;
  for (const char* name : {"outer_product", "relu", "relu2", "exp3", "softmax", "swiglu"}) {
    const auto spec = StoreSpec::parse(name, 4.0);
    torch::manual_seed(99);
    std::vector<double> isr2;
    for (int64_t t = 0; t < trials; ++t) {
      auto K = torch::randn({M, d}, torch::kFloat64), V = torch::randn({M, d}, torch::kFloat64);
      K = K / K.norm(2, 1, true), V = V / V.norm(2, 1, true);
      auto store = make_store(spec, d, d);
      store->write(K, V);
      auto w = store->recall_weights(K.slice(0, 0, 1))[0];  // (M,)
      auto interference = (w.slice(0, 1).unsqueeze(0).mm(V.slice(0, 1))).norm();
      isr2.push_back(std::pow(interference.item<double>() / std::abs(w[0].item<double>()), 2));
    }
    double mean = 0, var = 0;
    for (double x : isr2) mean += x / trials;
    for (double x : isr2) var += (x - mean) * (x - mean) / (trials - 1);
    const double se = std::sqrt(var / trials), theory = *expected_isr2(spec, d, M);
    EXPECT_NEAR(mean, theory, 3 * se) << name << ": theory " << theory;
  }
}

TEST(Theory, RejectsBadDimension) {
  EXPECT_THROW(similarity_expectation([](double s) { return s; }, 1), std::invalid_argument);
  EXPECT_THROW(theory_capacity(StoreSpec::parse("relu"), 0), std::invalid_argument);
}
