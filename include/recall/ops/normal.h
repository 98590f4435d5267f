// Standard normal floats, fast: the probe draws billions of them (keys and values uniform on the
// sphere are normalised Gaussian vectors), and torch's CPU normal_ (a Mersenne twister and
// Box-Muller, about 150 M floats/s on one thread) took longer than all the products they feed.
//
// The normal stream of a seed: 16 lanes, each a xoshiro128** generator seeded by splitmix64
// (recall/core/random.h) from (seed, lane); a step draws one 32-bit word per lane. Two steps
// (u, w) give 32 normals by Box-Muller,
//   z_l = r_l cos(2 pi t_l),  z_{16+l} = r_l sin(2 pi t_l),  r = sqrt(-2 ln U),
//   U = (u >> 8 + 1) / 2^24 in (0, 1],  t = (w >> 8) / 2^24 in [0, 1),
// and a draw of n floats is the first n of ceil(n / 32) such groups. One draw runs on one thread:
// callers split work by seed, so the numbers never depend on the thread count.
#pragma once
#include <cstdint>

#include "recall/core/random.h"

namespace recall {

// out[0, n) = the normal stream of `seed`, on 16-float vectors with float polynomials for the
// logarithm, sine and cosine (relative error about 1e-7; |z| <= 5.6 as U >= 2^-24). Under
// reference_kernels() (recall/ops/kernels.h) it runs fill_normal_reference.
void fill_normal(float* out, int64_t n, uint64_t seed);

// The same stream one lane at a time, with std::log, std::cos and std::sin in double: the
// reference of fill_normal's fast path, which agrees with it to within 1e-5 absolute.
void fill_normal_reference(float* out, int64_t n, uint64_t seed);

}  // namespace recall
