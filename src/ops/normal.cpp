#include "recall/ops/normal.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "recall/ops/kernels.h"
#include "recall/ops/row_math.h"

namespace recall {

namespace {

constexpr int kLanes = 16;
constexpr double kTwoPi = 6.283185307179586476925286766559;

// Lane l's xoshiro128** state: two splitmix64 words of (seed, l), never all zero.
std::array<uint32_t, 4> lane_state(uint64_t seed, int lane) {
  const uint64_t a = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(2 * lane + 1))),
                 b = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(2 * lane + 2)));
  std::array<uint32_t, 4> s = {static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32),
                               static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32)};
  if ((s[0] | s[1] | s[2] | s[3]) == 0) s[0] = 1;
  return s;
}

// xoshiro128** (Blackman and Vigna): one 32-bit word, on one lane or on 16 at once.
template <typename T>
inline T rotl(T x, int k) {
  return (x << k) | (x >> (32 - k));
}
template <typename T>
inline T next_word(T& s0, T& s1, T& s2, T& s3) {
  const T out = rotl<T>(s1 * 5u, 7) * 9u;
  const T t = s1 << 9;
  s2 ^= s0;
  s3 ^= s1;
  s1 ^= s2;
  s0 ^= s3;
  s2 ^= t;
  s3 = rotl<T>(s3, 11);
  return out;
}

using row_math::IVec;
using row_math::splat;
using row_math::Vec;
typedef uint32_t UVec __attribute__((vector_size(64)));

RECALL_INLINE Vec as_float(IVec x) {
  Vec v;
  std::memcpy(&v, &x, sizeof v);
  return v;
}
RECALL_INLINE IVec as_int(Vec x) {
  IVec v;
  std::memcpy(&v, &x, sizeof v);
  return v;
}

// ln x for normal floats x in (0, 1] (Cephes logf: x = 2^e m, m in [sqrt(1/2), sqrt(2)), a
// degree-9 polynomial in m - 1).
RECALL_INLINE Vec log_unit(Vec x) {
  const IVec bits = as_int(x);
  IVec e = (bits >> 23) - 126;
  Vec m = as_float((bits & 0x007fffff) | 0x3f000000);  // [0.5, 1)
  const IVec low = m < 0.70710678118654752f;           // -1 where m < sqrt(1/2)
  e += low;
  m = low ? m + m - 1.0f : m - 1.0f;
  const Vec fe = __builtin_convertvector(e, Vec);
  const Vec z = m * m;
  Vec y = splat(7.0376836292e-2f);
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z + fe * -2.12194440e-4f - 0.5f * z;
  return m + y + fe * 0.693359375f;
}

// sqrt x for x >= 0: x / sqrt(x) by three Newton steps on 1 / sqrt(x) from the exponent-halving
// guess; 0 stays 0.
RECALL_INLINE Vec sqrt_nonnegative(Vec x) {
  const Vec safe = row_math::vmax(x, splat(1e-30f));
  Vec y = as_float(0x5f3759df - (as_int(safe) >> 1));
  const Vec half = 0.5f * safe;
  for (int i = 0; i < 3; ++i) y = y * (1.5f - half * y * y);
  return x > 0.0f ? safe * y : splat(0.0f);
}

// sin and cos of 2 pi t, t in [0, 1): t = k / 4 + f with |f| <= 1/8, then Cephes' sinf and cosf
// polynomials at a = 2 pi f, rotated by the quadrant k.
RECALL_INLINE void sincos_turns(Vec t, Vec& sin_out, Vec& cos_out) {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const Vec k = (t * 4.0f + kShift) - kShift;
  const Vec a = (t - k * 0.25f) * static_cast<float>(kTwoPi);
  const Vec z = a * a;
  const Vec s = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * a + a;
  const Vec c =
      ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z -
      0.5f * z + 1.0f;
  const IVec q = __builtin_convertvector(k, IVec);
  const IVec odd = (q & 1) != 0;
  const Vec sv = odd ? c : s, cv = odd ? s : c;  // sin(a + q pi/2) is +-cos a for odd q
  sin_out = (q & 2) != 0 ? -sv : sv;             // negative in quadrants 2 and 3
  cos_out = ((q + 1) & 2) != 0 ? -cv : cv;       // negative in quadrants 1 and 2
}

RECALL_VECTOR_CLONES void fill_normal_fast(float* out, int64_t n, uint64_t seed) {
  UVec s0, s1, s2, s3;
  for (int l = 0; l < kLanes; ++l) {
    const auto s = lane_state(seed, l);
    s0[l] = s[0];
    s1[l] = s[1];
    s2[l] = s[2];
    s3[l] = s[3];
  }
  for (int64_t i = 0; i < n; i += 2 * kLanes) {
    const UVec u = next_word(s0, s1, s2, s3), w = next_word(s0, s1, s2, s3);
    const Vec U = (__builtin_convertvector((IVec)(u >> 8), Vec) + 1.0f) * (1.0f / 16777216.0f);
    const Vec t = __builtin_convertvector((IVec)(w >> 8), Vec) * (1.0f / 16777216.0f);
    const Vec r = sqrt_nonnegative(-2.0f * log_unit(U));
    Vec sn, cs;
    sincos_turns(t, sn, cs);
    if (i + 2 * kLanes <= n) {
      row_math::store(out + i, r * cs);
      row_math::store(out + i + kLanes, r * sn);
    } else {  // the last group, partly
      float group[2 * kLanes];
      row_math::store(group, r * cs);
      row_math::store(group + kLanes, r * sn);
      std::copy(group, group + (n - i), out + i);
    }
  }
}

}  // namespace

void fill_normal(float* out, int64_t n, uint64_t seed) {
  if (reference_kernels()) return fill_normal_reference(out, n, seed);
  fill_normal_fast(out, n, seed);
}

void fill_normal_reference(float* out, int64_t n, uint64_t seed) {
  std::array<std::array<uint32_t, 4>, kLanes> s;
  for (int l = 0; l < kLanes; ++l) s[l] = lane_state(seed, l);
  std::array<uint32_t, kLanes> u, w;
  for (int64_t i = 0; i < n; i += 2 * kLanes) {
    for (int l = 0; l < kLanes; ++l) u[l] = next_word(s[l][0], s[l][1], s[l][2], s[l][3]);
    for (int l = 0; l < kLanes; ++l) w[l] = next_word(s[l][0], s[l][1], s[l][2], s[l][3]);
    for (int l = 0; l < kLanes; ++l) {
      const double U = (static_cast<double>(u[l] >> 8) + 1.0) / 16777216.0,
                   t = static_cast<double>(w[l] >> 8) / 16777216.0;
      const double r = std::sqrt(-2.0 * std::log(U));
      if (i + l < n) out[i + l] = static_cast<float>(r * std::cos(kTwoPi * t));
      if (i + kLanes + l < n) out[i + kLanes + l] = static_cast<float>(r * std::sin(kTwoPi * t));
    }
  }
}

}  // namespace recall
