#include "recall/ops/tile_gemm.h"

#include <algorithm>
#include <cmath>

#include "recall/ops/row_math.h"

// GCC only, as RECALL_VECTOR_CLONES: clang refuses 64-byte vectors passed between functions not
// compiled for AVX-512, and clang builds here are the sanitized ones.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define RECALL_TILE_AVX512 1
#endif

namespace recall {

namespace {

constexpr int64_t kLanes = 16;  // floats per vector, in both vector types below

// The vector operations of the tiles, on GCC's generic 16-float vectors (compiled per ISA by
// RECALL_VECTOR_CLONES).
struct GenericOps {
  using V = row_math::Vec;
  static RECALL_INLINE V load(const float* p) { return row_math::load(p); }
  static RECALL_INLINE void store(float* p, V v) { row_math::store(p, v); }
  static RECALL_INLINE V zero() { return row_math::splat(0.0f); }
  static RECALL_INLINE V broadcast(const float* p) { return row_math::splat(*p); }
  static RECALL_INLINE V fma(V a, V b, V c) { return c + a * b; }
};

#ifdef RECALL_TILE_AVX512
// Not always_inline: GCC checks that on each call as it is written, and block() has no target;
// gemm_avx512's flatten inlines them all into one AVX-512 function.
#define RECALL_AVX512 __attribute__((target("avx512f"))) inline
// The same on AVX-512 intrinsics. GCC builds the generic broadcast in a register (an add to zero,
// then a shuffle on the port the FMAs need): one product of the tiles ran at about half the
// machine's GEMM rate. A broadcast from memory is a load, and the FMAs keep both ports.
struct Avx512Ops {
  using V = __m512;
  static RECALL_AVX512 V load(const float* p) { return _mm512_loadu_ps(p); }
  static RECALL_AVX512 void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static RECALL_AVX512 V zero() { return _mm512_setzero_ps(); }
  static RECALL_AVX512 V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static RECALL_AVX512 V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
};
#endif

// Rows [i0, i0 + R) x columns [j0, j0 + 16 NV): R x NV vectors held in registers over the k loop
// (R = 4, NV = 4: 16 accumulators, 4 loads of B and 4 broadcasts of A per step of k). A's element
// (i, p) is A[i ar + p ac], so A is read as stored or transposed.
template <typename Ops, int R, int NV>
RECALL_INLINE void block(const float* A, int64_t ar, int64_t ac, const float* B, int64_t ldb,
                         float* C, int64_t ldc, int64_t k, bool accumulate) {
  typename Ops::V c[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v)
      c[r][v] = accumulate ? Ops::load(C + r * ldc + v * kLanes) : Ops::zero();
  for (int64_t p = 0; p < k; ++p) {
    typename Ops::V b[NV];
    for (int v = 0; v < NV; ++v) b[v] = Ops::load(B + p * ldb + v * kLanes);
    for (int r = 0; r < R; ++r) {
      const auto a = Ops::broadcast(A + r * ar + p * ac);
      for (int v = 0; v < NV; ++v) c[r][v] = Ops::fma(a, b[v], c[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) Ops::store(C + r * ldc + v * kLanes, c[r][v]);
}

// Panels of NV vectors of columns by kDepth rows of B outside, row blocks inside: a panel (at most
// 64 x 64 floats, 16 KiB) stays in L1 while every row block passes over it. C is stored and
// reloaded between depth steps, so every element still sums over k in order.
constexpr int64_t kDepth = 64;

// Row blocks of R = 4 rows for panels of 4 vectors, 8 for narrower ones (16 accumulators either
// way, of the 32 vector registers AVX-512 has).
template <typename Ops, int NV>
RECALL_INLINE void panel(const float* A, int64_t ar, int64_t ac, const float* B, int64_t ldb,
                         float* C, int64_t ldc, int64_t m, int64_t k, bool accumulate) {
  constexpr int R = NV >= 4 ? 4 : 8;
  for (int64_t p0 = 0; p0 < k; p0 += kDepth) {
    const int64_t depth = std::min(kDepth, k - p0);
    const bool add = accumulate || p0 > 0;
    const float* Ap = A + p0 * ac;
    const float* Bp = B + p0 * ldb;
    int64_t i = 0;
    for (; i + R <= m; i += R)
      block<Ops, R, NV>(Ap + i * ar, ar, ac, Bp, ldb, C + i * ldc, ldc, depth, add);
    for (; i < m; ++i)
      block<Ops, 1, NV>(Ap + i * ar, ar, ac, Bp, ldb, C + i * ldc, ldc, depth, add);
  }
}

template <typename Ops>
RECALL_INLINE void gemm(const float* A, int64_t ar, int64_t ac, const float* B, int64_t ldb,
                        float* C, int64_t ldc, int64_t m, int64_t n, int64_t k, bool accumulate) {
  int64_t j = 0;
  for (; j + 4 * kLanes <= n; j += 4 * kLanes)
    panel<Ops, 4>(A, ar, ac, B + j, ldb, C + j, ldc, m, k, accumulate);
  for (; j + 2 * kLanes <= n; j += 2 * kLanes)
    panel<Ops, 2>(A, ar, ac, B + j, ldb, C + j, ldc, m, k, accumulate);
  for (; j + kLanes <= n; j += kLanes)
    panel<Ops, 1>(A, ar, ac, B + j, ldb, C + j, ldc, m, k, accumulate);
  for (; j < n; ++j)  // the last columns, one at a time, summed in the same order
    for (int64_t i = 0; i < m; ++i) {
      float s = accumulate ? C[i * ldc + j] : 0.0f;
      for (int64_t p = 0; p < k; ++p) s = std::fma(A[i * ar + p * ac], B[p * ldb + j], s);
      C[i * ldc + j] = s;
    }
}

RECALL_VECTOR_CLONES void gemm_generic(const float* A, int64_t ar, int64_t ac, const float* B,
                                       int64_t ldb, float* C, int64_t ldc, int64_t m, int64_t n,
                                       int64_t k, bool accumulate) {
  gemm<GenericOps>(A, ar, ac, B, ldb, C, ldc, m, n, k, accumulate);
}

#ifdef RECALL_TILE_AVX512
__attribute__((target("avx512f"), flatten)) void gemm_avx512(const float* A, int64_t ar, int64_t ac,
                                                             const float* B, int64_t ldb, float* C,
                                                             int64_t ldc, int64_t m, int64_t n,
                                                             int64_t k, bool accumulate) {
  gemm<Avx512Ops>(A, ar, ac, B, ldb, C, ldc, m, n, k, accumulate);
}
#endif

void zero_rows(float* C, int64_t ldc, int64_t m, int64_t n) {
  for (int64_t i = 0; i < m; ++i) std::fill(C + i * ldc, C + i * ldc + n, 0.0f);
}

}  // namespace

void tile_gemm_portable(const float* A, int64_t ar, int64_t ac, const float* B, int64_t ldb,
                        float* C, int64_t ldc, int64_t m, int64_t n, int64_t k, bool accumulate) {
  if (k == 0) return accumulate ? void() : zero_rows(C, ldc, m, n);
  gemm_generic(A, ar, ac, B, ldb, C, ldc, m, n, k, accumulate);
}

bool tile_gemm_avx512() {
#ifdef RECALL_TILE_AVX512
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
#else
  return false;
#endif
}

void tile_gemm(const float* A, int64_t ar, int64_t ac, const float* B, int64_t ldb, float* C,
               int64_t ldc, int64_t m, int64_t n, int64_t k, bool accumulate) {
#ifdef RECALL_TILE_AVX512
  if (tile_gemm_avx512() && k > 0)
    return gemm_avx512(A, ar, ac, B, ldb, C, ldc, m, n, k, accumulate);
#endif
  tile_gemm_portable(A, ar, ac, B, ldb, C, ldc, m, n, k, accumulate);
}

}  // namespace recall
