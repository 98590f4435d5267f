// Exact theory of interference (docs/science.md §3). For keys uniform on the unit sphere in R^d,
// the similarity s = k_i . k_j of two independent keys has density proportional to (1 -
// s^2)^((d-3)/2) on (-1, 1). With random unit values the cross terms vanish in expectation, so a
// weight-function store has
//   E[ISR^2] = (M - 1) E[sigma(s)^2] / sigma(1)^2,   capacity = 1 + sigma(1)^2 / E[sigma(s)^2].
// Least squares: E[ISR^2] = 0 for M <= d and M/d - 1 above (exact for Gaussian keys), capacity 2d.
#pragma once
#include <functional>
#include <optional>

#include "recall/stores/store.h"

namespace recall {

enum class KeyLaw {
  kSphere,    // exact for unit keys: s has the sphere density above
  kGaussian,  // the essay's shortcut: s ~ N(0, 1/d)
};

// E[g(s)] for s the similarity of two independent keys in R^d (d >= 2), by Gauss-Legendre
// quadrature over the angle (s = cos theta, density sin^(d-2) theta), with a panel boundary at s =
// 0 so that kinks there (relu) are integrated exactly. Relative accuracy about 1e-12 for smooth g.
double similarity_expectation(const std::function<double(double)>& g, int64_t d,
                              KeyLaw law = KeyLaw::kSphere);

// Closed form E[s^m] on the sphere: 0 for odd m, (m-1)!! / (d (d+2) ... (d+m-2)) for even m.
double sphere_moment(int m, int64_t d);

// E[sigma(s)^2] / sigma(1)^2: the interference per memory, relative to the signal.
double interference_per_memory(const WeightFunction& w, int64_t d, KeyLaw law = KeyLaw::kSphere);

// E[ISR^2] of `spec` holding M memories; nullopt when there is no theory (delta).
std::optional<double> expected_isr2(const StoreSpec& spec, int64_t d, double M,
                                    KeyLaw law = KeyLaw::kSphere);

// M at which E[ISR^2] = 1; nullopt when there is no theory.
std::optional<double> theory_capacity(const StoreSpec& spec, int64_t d,
                                      KeyLaw law = KeyLaw::kSphere);

}  // namespace recall
