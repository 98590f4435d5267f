// Row-wise float kernels for the model's fused CPU paths: softmax over a causal prefix and its
// backward, bias + exact GELU and its backward, LayerNorm and its backward, the cross-entropy and
// its backward, the reductions they need, and the rounding of float32 to bfloat16 that the bf16
// products take. Written on 16-float vectors (GCC vector extensions; branch-free exp and erf) so
// that they vectorise; on x86-64 Linux each kernel is also compiled for AVX2 and AVX-512 machines
// and picked at load time.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

// GCC only: clang refuses 64-byte vector arguments in an avx2 clone (an ABI change it treats as
// an error), and clang builds here are the sanitized ones, where speed does not matter.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
#define RECALL_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RECALL_VECTOR_CLONES
#endif

namespace recall::row_math {

// 16 floats in one value; the compiler maps it onto whatever registers the target has.
typedef float Vec __attribute__((vector_size(64)));
typedef int32_t IVec __attribute__((vector_size(64)));
typedef uint32_t UVec __attribute__((vector_size(64)));
typedef uint16_t HVec __attribute__((vector_size(32)));  // 16 bfloat16 bit patterns
constexpr int64_t kLanes = 16;

#define RECALL_INLINE inline __attribute__((always_inline))

RECALL_INLINE Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
RECALL_INLINE void store(float* p, Vec v) {
  std::memcpy(p, &v, sizeof v);
}
RECALL_INLINE Vec splat(float x) {
  return Vec{} + x;
}
RECALL_INLINE Vec vmax(Vec a, Vec b) {
  return a > b ? a : b;
}

// The sum and the maximum of a vector's lanes, as a tree of four shuffles: summed lane by lane
// they were sixteen dependent adds, which cost more than the arithmetic of a 64-float row (the
// attention's softmax rows, LayerNorm at d_model 128).
RECALL_INLINE float hsum(Vec v) {
  v += __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
  v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  v += __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
  return v[0];
}
RECALL_INLINE float hmax(Vec v) {
  v = vmax(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  v = vmax(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  v = vmax(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  v = vmax(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
  return v[0];
}

// exp(x) for x <= 0 (Cephes expf: x = n ln2 + r, |r| <= ln2 / 2, a degree-6 polynomial for e^r,
// times 2^n built in the exponent bits); relative error about 2e-7. Below -87 it returns about
// e^-87 < 2^-125: negligible beside the row maximum's e^0 = 1 in a softmax.
RECALL_INLINE Vec exp_nonpositive(Vec x) {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the bits
  x = vmax(x, splat(-87.0f));
  const Vec shifted = x * 1.44269504088896341f + kShift;
  const Vec n = shifted - kShift;                           // round(x / ln 2), in [-126, 0]
  const Vec r = x - n * 0.693359375f + n * 2.12194440e-4f;  // ln 2 = 0.693359375 - 2.12e-4
  Vec p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  IVec bits, shift_bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  const Vec shift = splat(kShift);
  std::memcpy(&shift_bits, &shift, sizeof shift_bits);
  const IVec scale_bits = (bits - shift_bits + 127) << 23;  // 2^n
  Vec scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return p * scale;
}

RECALL_INLINE float exp_nonpositive(float x) {
  return exp_nonpositive(splat(x))[0];
}

RECALL_INLINE float max_of(const float* x, int64_t n) {
  Vec acc = splat(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) acc = vmax(acc, load(x + j));
  float m = -std::numeric_limits<float>::infinity();
  for (; j < n; ++j) m = std::max(m, x[j]);
  return std::max(m, hmax(acc));
}

RECALL_INLINE float sum_of(const float* x, int64_t n) {
  Vec acc{};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) acc += load(x + j);
  float s = 0.0f;
  for (; j < n; ++j) s += x[j];
  return s + hsum(acc);
}

// A row of weights as float32: kept as float32, or as the bfloat16 bit patterns (exact widening).
RECALL_INLINE Vec load_weights(const float* p) {
  return load(p);
}
RECALL_INLINE Vec load_weights(const uint16_t* p) {
  HVec h;
  std::memcpy(&h, p, sizeof h);
  const UVec u = __builtin_convertvector(h, UVec) << 16;
  Vec v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}
RECALL_INLINE float weight_at(const float* p, int64_t j) {
  return p[j];
}
RECALL_INLINE float weight_at(const uint16_t* p, int64_t j) {
  const uint32_t u = static_cast<uint32_t>(p[j]) << 16;
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// x . y, x float32 or bfloat16 bits (widened exactly).
template <typename In>
RECALL_INLINE float dot_of(const In* x, const float* y, int64_t n) {
  Vec acc{};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) acc += load_weights(x + j) * load(y + j);
  float s = 0.0f;
  for (; j < n; ++j) s += weight_at(x, j) * y[j];
  return s + hsum(acc);
}

// The exact GELU, x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, and its derivative
// Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi). erf by Abramowitz & Stegun 7.1.26
// (|error| <= 1.5e-7): erf|u| = 1 - t (a1 + t (a2 + ... + t a5)) exp(-u^2), t = 1 / (1 + p |u|);
// the same exp(-u^2), u = x / sqrt 2, gives phi.
struct GeluParts {
  Vec cdf;  // Phi(x)
  Vec pdf;  // phi(x)
};

RECALL_INLINE GeluParts gelu_parts(Vec x) {
  const Vec u = x * 0.70710678118654752f;
  const Vec au = u < 0.0f ? -u : u;
  const Vec t = 1.0f / (1.0f + 0.3275911f * au);
  Vec poly = splat(1.061405429f);
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  poly = poly * t;
  const Vec e = exp_nonpositive(-(u * u));  // exp(-x^2 / 2)
  const Vec erf_abs = 1.0f - poly * e;
  const Vec erf = u < 0.0f ? -erf_abs : erf_abs;
  return {0.5f * (1.0f + erf), e * 0.39894228040143268f};
}

// Cross-entropy rows of logits x (n, w) against targets y (n,): lse_i = log sum_j e^(x_ij), by
// the row's maximum m_i, and loss_i = lse_i - x_i[y_i]. A NaN or infinite logit makes its row's
// loss NaN (v - v is 0 for every finite v), as torch's log_softmax does, rather than a finite loss.
RECALL_VECTOR_CLONES inline void cross_entropy_rows(const float* x, const int64_t* y, float* lse,
                                                    float* loss, int64_t n, int64_t w) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * w;
    const float m = max_of(xi, w);
    Vec acc{}, finite{};
    int64_t j = 0;
    for (; j + kLanes <= w; j += kLanes) {
      const Vec v = load(xi + j);
      acc += exp_nonpositive(v - m);
      finite += v - v;
    }
    float s = 0.0f, f = 0.0f;
    for (; j < w; ++j) {
      s += exp_nonpositive(xi[j] - m);
      f += xi[j] - xi[j];
    }
    s += hsum(acc);
    f += hsum(finite);
    lse[i] = m + std::log(s);
    loss[i] = lse[i] - xi[y[i]] + f;
  }
}

// Its backward for a loss summed over the rows and scaled by g: gx_ij = g (e^(x_ij - lse_i) -
// [j = y_i]), the softmax less the target's one-hot, in one pass.
RECALL_VECTOR_CLONES inline void cross_entropy_backward_rows(const float* x, const int64_t* y,
                                                             const float* lse, float g, float* gx,
                                                             int64_t n, int64_t w) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * w;
    float* gi = gx + i * w;
    const float l = lse[i];
    int64_t j = 0;
    for (; j + kLanes <= w; j += kLanes) store(gi + j, exp_nonpositive(load(xi + j) - l) * g);
    for (; j < w; ++j) gi[j] = exp_nonpositive(xi[j] - l) * g;
    gi[y[i]] -= g;
  }
}

// LayerNorm over rows of w: y = (x - mean) * rstd * weight (+ bias), rstd = 1 / sqrt(var + eps),
// the biased variance (as torch). Writes each row's mean and rstd. bias may be null. Without
// `center` the mean is taken as 0: RMSNorm, y = x / sqrt(mean(x^2) + eps) * weight.
RECALL_VECTOR_CLONES inline void layer_norm_rows(const float* x, const float* weight,
                                                 const float* bias, float* y, float* mean,
                                                 float* rstd, int64_t n, int64_t w, float eps,
                                                 bool center = true) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * w;
    float* yi = y + i * w;
    const float m = center ? sum_of(xi, w) / static_cast<float>(w) : 0.0f;
    Vec acc{};
    int64_t j = 0;
    for (; j + kLanes <= w; j += kLanes) {
      const Vec c = load(xi + j) - m;
      acc += c * c;
    }
    float var = 0.0f;
    for (; j < w; ++j) var += (xi[j] - m) * (xi[j] - m);
    var += hsum(acc);
    const float r = 1.0f / std::sqrt(var / static_cast<float>(w) + eps);
    mean[i] = m;
    rstd[i] = r;
    for (j = 0; j + kLanes <= w; j += kLanes) {
      Vec v = (load(xi + j) - m) * r * load(weight + j);
      if (bias) v += load(bias + j);
      store(yi + j, v);
    }
    for (; j < w; ++j) yi[j] = (xi[j] - m) * r * weight[j] + (bias ? bias[j] : 0.0f);
  }
}

// The LayerNorm backward over rows of w, with xhat = (x - mean) rstd and gh = g * weight:
// gx = rstd (gh - mean_j(gh) - xhat mean_j(gh xhat)); gweight += sum_i g xhat; gbias += sum_i g.
// Without `center` (RMSNorm, mean 0): gx = rstd (gh - xhat mean_j(gh xhat)).
RECALL_VECTOR_CLONES inline void layer_norm_backward_rows(const float* g, const float* x,
                                                          const float* weight, const float* mean,
                                                          const float* rstd, float* gx,
                                                          float* gweight, float* gbias, int64_t n,
                                                          int64_t w, bool center = true) {
  const float inv_w = 1.0f / static_cast<float>(w);
  for (int64_t i = 0; i < n; ++i) {
    const float* gi = g + i * w;
    const float* xi = x + i * w;
    float* oi = gx + i * w;
    const float m = mean[i], r = rstd[i];
    Vec acc_gh{}, acc_ghx{};
    int64_t j = 0;
    for (; j + kLanes <= w; j += kLanes) {
      const Vec gv = load(gi + j), xhat = (load(xi + j) - m) * r, gh = gv * load(weight + j);
      acc_gh += gh;
      acc_ghx += gh * xhat;
      store(gweight + j, load(gweight + j) + gv * xhat);
      store(gbias + j, load(gbias + j) + gv);
    }
    float s_gh = 0.0f, s_ghx = 0.0f;
    for (; j < w; ++j) {
      const float xhat = (xi[j] - m) * r, gh = gi[j] * weight[j];
      s_gh += gh;
      s_ghx += gh * xhat;
      gweight[j] += gi[j] * xhat;
      gbias[j] += gi[j];
    }
    s_gh += hsum(acc_gh);
    s_ghx += hsum(acc_ghx);
    const float a = center ? s_gh * inv_w : 0.0f, b = s_ghx * inv_w;
    for (j = 0; j + kLanes <= w; j += kLanes) {
      const Vec xhat = (load(xi + j) - m) * r;
      store(oi + j, r * (load(gi + j) * load(weight + j) - a - xhat * b));
    }
    for (; j < w; ++j) oi[j] = r * (gi[j] * weight[j] - a - (xi[j] - m) * r * b);
  }
}

// float32 -> bfloat16 (the upper 16 bits), rounded to nearest, ties to even, as c10::BFloat16
// rounds: adding 0x7FFF plus the lowest kept bit carries into the kept bits exactly when the
// dropped half is above one half, or equal to it with the kept value odd. A NaN stays a (quiet)
// NaN; an overflow rounds to infinity, as it must.
RECALL_INLINE HVec bf16_bits(Vec x) {
  UVec u;
  std::memcpy(&u, &x, sizeof u);
  const UVec rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return __builtin_convertvector(x == x ? rounded : UVec{} + 0x7FC0u, HVec);
}
RECALL_INLINE uint16_t bf16_bits(float x) {
  Vec v{};
  v[0] = x;  // not splat(x): 0 + -0 is +0, and a denormal flushed
  return bf16_bits(v)[0];
}

// The same rounding as a float32 value: bf16_bits(x) as the upper half, zeros below. Exact, so
// an sgemm of such values multiplies the bfloat16 numbers themselves (each product exact in
// float32, sums in float32), as a bf16 GEMM with float32 accumulation does. The rounding stays in
// the 32-bit lanes: narrowing to 16 bits and widening back (two cross-lane shuffles a vector) cost
// the attention's bf16 softmax passes 4 % of its time.
RECALL_INLINE Vec bf16_value(Vec x) {
  UVec u;
  std::memcpy(&u, &x, sizeof u);
  const UVec rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  const UVec bits = x == x ? rounded : UVec{} + 0x7FC00000u;
  Vec v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
RECALL_INLINE float bf16_value(float x) {
  const uint32_t u = static_cast<uint32_t>(bf16_bits(x)) << 16;
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// x rounded to bfloat16 and stored at y: the bit patterns (uint16_t y), or the values as float32
// (float y, bf16_value), whichever the products after it take; one vector or one float.
RECALL_INLINE void store_bf16(float* y, Vec x) {
  store(y, bf16_value(x));
}
RECALL_INLINE void store_bf16(uint16_t* y, Vec x) {
  const HVec h = bf16_bits(x);
  std::memcpy(y, &h, sizeof h);
}
RECALL_INLINE void store_bf16(float* y, float x) {
  *y = bf16_value(x);
}
RECALL_INLINE void store_bf16(uint16_t* y, float x) {
  *y = bf16_bits(x);
}

// x stored as the next products' operand: float32 as it is (float y), or its bfloat16 bit
// patterns (uint16_t y) for the bf16 GEMM; one vector or one float.
template <typename T>
RECALL_INLINE void store_operand(float* y, T x) {
  if constexpr (std::is_same_v<T, Vec>) {
    store(y, x);
  } else {
    *y = x;
  }
}
template <typename T>
RECALL_INLINE void store_operand(uint16_t* y, T x) {
  store_bf16(y, x);
}

// y = gelu(v), v = x + bias, over n rows of w, row-major; d (may alias x) receives gelu'(v) =
// Phi(v) + v phi(v), all the backward needs: written here, where Phi and phi are computed anyway,
// the backward is one multiply, where recomputing them from v cost it as much as this pass. bias:
// w floats. y is float32, or (uint16_t y) the bfloat16 bit patterns of those values, the operand of
// the bf16 product after it.
template <typename Out>
RECALL_INLINE void bias_gelu_rows_as(const float* x, const float* bias, float* d, Out* y, int64_t n,
                                     int64_t w) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * w;
    float* di = d + i * w;
    Out* yi = y + i * w;
    int64_t j = 0;
    for (; j + kLanes <= w; j += kLanes) {
      const Vec v = load(xi + j) + load(bias + j);
      const GeluParts p = gelu_parts(v);
      store(di + j, p.cdf + v * p.pdf);
      store_operand(yi + j, v * p.cdf);
    }
    for (; j < w; ++j) {
      const float v = xi[j] + bias[j];
      const GeluParts p = gelu_parts(splat(v));
      di[j] = p.cdf[0] + v * p.pdf[0];
      store_operand(yi + j, v * p.cdf[0]);
    }
  }
}
RECALL_VECTOR_CLONES inline void bias_gelu_rows(const float* x, const float* bias, float* d,
                                                float* y, int64_t n, int64_t w) {
  bias_gelu_rows_as(x, bias, d, y, n, w);
}
RECALL_VECTOR_CLONES inline void bias_gelu_rows(const float* x, const float* bias, float* d,
                                                uint16_t* y, int64_t n, int64_t w) {
  bias_gelu_rows_as(x, bias, d, y, n, w);
}

// y[j] = bf16(x[j]) for j < n: the bit patterns (uint16_t y), or the values (float y, bf16_value).
template <typename Out>
RECALL_INLINE void round_to_bf16_rows(const float* x, Out* y, int64_t n) {
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) store_bf16(y + j, load(x + j));
  for (; j < n; ++j) store_bf16(y + j, x[j]);
}
RECALL_VECTOR_CLONES inline void round_to_bf16(const float* x, uint16_t* y, int64_t n) {
  round_to_bf16_rows(x, y, n);
}
RECALL_VECTOR_CLONES inline void round_to_bf16(const float* x, float* y, int64_t n) {
  round_to_bf16_rows(x, y, n);
}

// y = x, or with d (kScaled) y = x * d, over n rows of w, stored as the next products' operand
// (store_operand: float32, or the bfloat16 bits; Out void: not stored), and sums (w floats) += the
// column sums of the float32 values, in one read of x.
template <bool kScaled, typename Out>
RECALL_INLINE void summing_rows_as(const float* x, const float* d, Out* y, float* sums, int64_t n,
                                   int64_t w) {
  constexpr bool kStore = !std::is_void_v<Out>;
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * w;
    const float* di = kScaled ? d + i * w : nullptr;
    int64_t j = 0;
    for (; j + kLanes <= w; j += kLanes) {
      Vec v = load(xi + j);
      if constexpr (kScaled) v *= load(di + j);
      if constexpr (kStore) store_operand(y + i * w + j, v);
      store(sums + j, load(sums + j) + v);
    }
    for (; j < w; ++j) {
      const float v = kScaled ? xi[j] * di[j] : xi[j];
      if constexpr (kStore) store_operand(y + i * w + j, v);
      sums[j] += v;
    }
  }
}

// y += bias over n rows of w, in place: the bias a product's output gets after the product, which
// writes every element of it once (beta 0), where a product onto rows of the bias (beta 1) reads
// them back as well.
RECALL_VECTOR_CLONES inline void add_bias_rows(float* y, const float* bias, int64_t n, int64_t w) {
  for (int64_t i = 0; i < n; ++i) {
    float* yi = y + i * w;
    int64_t j = 0;
    for (; j + kLanes <= w; j += kLanes) store(yi + j, load(yi + j) + load(bias + j));
    for (; j < w; ++j) yi[j] += bias[j];
  }
}

// sums (w floats) += the column sums of x (n rows of w): summing_rows_as storing nothing. (Four
// rows at a time, each row of sums loaded and stored once for four of x, ran 1.7x slower on Zen 4.)
RECALL_VECTOR_CLONES inline void add_column_sums(const float* x, float* sums, int64_t n,
                                                 int64_t w) {
  summing_rows_as<false>(x, nullptr, static_cast<void*>(nullptr), sums, n, w);
}

// y = bf16(x) (the bit patterns) over n rows of w, and sums (w floats) += the column sums of x, in
// one read of x.
RECALL_VECTOR_CLONES inline void round_to_bf16_summing(const float* x, uint16_t* y, float* sums,
                                                       int64_t n, int64_t w) {
  summing_rows_as<false>(x, nullptr, y, sums, n, w);
}

// The GELU backward, gs = g * gelu'(v) over n rows of w from the derivative d = gelu'(v) that
// bias_gelu_rows wrote; gbias (w floats) += the column sums of gs. gs is written as float32, or
// (uint16_t gs) as the bfloat16 bit patterns of those values, the operand the next bf16 products
// take, in the same pass; the bias sums the float32 values either way.
RECALL_VECTOR_CLONES inline void gelu_backward_rows(const float* g, const float* d, float* gs,
                                                    float* gbias, int64_t n, int64_t w) {
  summing_rows_as<true>(g, d, gs, gbias, n, w);
}
RECALL_VECTOR_CLONES inline void gelu_backward_rows(const float* g, const float* d, uint16_t* gs,
                                                    float* gbias, int64_t n, int64_t w) {
  summing_rows_as<true>(g, d, gs, gbias, n, w);
}

// P: rows x w, row-major. Row i sees its first min(w, first + i + 1) entries (logits); the rest is
// masked. Replaces each row with the softmax over what it sees, and zeros after; with `rounded`
// (rows x w), writes the result rounded to bfloat16 there too (store_bf16: values or bits).
template <typename Out>
RECALL_INLINE void causal_softmax_rows_as(float* P, int64_t rows, int64_t w, int64_t first,
                                          Out* rounded) {
  constexpr float kHidden = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < rows; ++i) {
    float* p = P + i * w;
    Out* r = rounded ? rounded + i * w : nullptr;
    const int64_t n = std::min(w, first + i + 1), body = n / kLanes * kLanes, rem = n - body;
    // The row's last rem < 16 logits in one vector, padded with hidden ones (weight 0): one
    // vector exp for them, where an exp each cost as much as a vector's.
    float buf[kLanes];
    std::fill(buf, buf + kLanes, kHidden);
    std::memcpy(buf, p + body, static_cast<size_t>(rem) * sizeof(float));
    const Vec tail = load(buf);
    Vec top = tail;
    for (int64_t j = 0; j < body; j += kLanes) top = vmax(top, load(p + j));
    const float m = hmax(top);
    Vec sum{};
    for (int64_t j = 0; j < body; j += kLanes) {
      const Vec e = exp_nonpositive(load(p + j) - m);
      store(p + j, e);
      sum += e;
    }
    const Vec tail_e = tail == kHidden ? Vec{} : exp_nonpositive(tail - m);
    const float inv = 1.0f / hsum(sum + tail_e);
    for (int64_t j = 0; j < body; j += kLanes) {
      const Vec v = load(p + j) * inv;
      store(p + j, v);
      if (r) store_bf16(r + j, v);
    }
    store(buf, tail_e * inv);
    std::memcpy(p + body, buf, static_cast<size_t>(rem) * sizeof(float));
    std::fill(p + n, p + w, 0.0f);
    if (r) {
      Out rbuf[kLanes];
      store_bf16(rbuf, tail_e * inv);
      std::memcpy(r + body, rbuf, static_cast<size_t>(rem) * sizeof(Out));
      std::fill(r + n, r + w, Out{});
    }
  }
}
RECALL_VECTOR_CLONES inline void causal_softmax_rows(float* P, int64_t rows, int64_t w,
                                                     int64_t first, float* rounded = nullptr) {
  causal_softmax_rows_as(P, rows, w, first, rounded);
}
RECALL_VECTOR_CLONES inline void causal_softmax_rows(float* P, int64_t rows, int64_t w,
                                                     int64_t first, uint16_t* rounded) {
  causal_softmax_rows_as(P, rows, w, first, rounded);
}

// The softmax backward per row: G <- P * (G - rowsum(P * G)); P, G: rows x w, P float32 or
// bfloat16 bits (In). In place, or with `rounded_g` (rows x w) the result rounded to bfloat16
// there instead (store_bf16: values or bits), G left as it was; with `rounded_p` too, P rounded
// there as well (the products take the rounded ones).
template <typename In, typename Out>
RECALL_INLINE void softmax_backward_rows_as(const In* P, float* G, int64_t rows, int64_t w,
                                            Out* rounded_p, Out* rounded_g) {
  for (int64_t i = 0; i < rows; ++i) {
    const In* p = P + i * w;
    float* g = G + i * w;
    const float d = dot_of(p, g, w);
    Out* rp = rounded_p ? rounded_p + i * w : nullptr;
    Out* rg = rounded_g ? rounded_g + i * w : nullptr;
    int64_t j = 0;
    for (; j + kLanes <= w; j += kLanes) {
      const Vec pv = load_weights(p + j), gv = pv * (load(g + j) - d);
      if (!rg) {
        store(g + j, gv);
        continue;
      }
      if (rp) store_bf16(rp + j, pv);
      store_bf16(rg + j, gv);
    }
    for (; j < w; ++j) {
      const float pj = weight_at(p, j), gv = pj * (g[j] - d);
      if (!rg) {
        g[j] = gv;
        continue;
      }
      if (rp) store_bf16(rp + j, pj);
      store_bf16(rg + j, gv);
    }
  }
}
RECALL_VECTOR_CLONES inline void softmax_backward_rows(const float* P, float* G, int64_t rows,
                                                       int64_t w, float* rounded_p = nullptr,
                                                       float* rounded_g = nullptr) {
  softmax_backward_rows_as(P, G, rows, w, rounded_p, rounded_g);
}
RECALL_VECTOR_CLONES inline void softmax_backward_rows(const float* P, float* G, int64_t rows,
                                                       int64_t w, uint16_t* rounded_p,
                                                       uint16_t* rounded_g) {
  softmax_backward_rows_as(P, G, rows, w, rounded_p, rounded_g);
}
// From weights kept as bfloat16 bits, which are already the products' operand: only the result
// is rounded (bits).
RECALL_VECTOR_CLONES inline void softmax_backward_rows(const uint16_t* P, float* G, int64_t rows,
                                                       int64_t w, uint16_t* rounded_g) {
  softmax_backward_rows_as(P, G, rows, w, static_cast<uint16_t*>(nullptr), rounded_g);
}

}  // namespace recall::row_math
