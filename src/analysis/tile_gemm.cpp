#include "recall/analysis/tile_gemm.h"

#include <algorithm>

#include "recall/core/row_math.h"

namespace recall {

namespace {

using row_math::kLanes;
using row_math::Vec;

// Rows [i0, i0 + R) x columns [j0, j0 + V 16): R x V vectors held in registers over the k loop
// (R = 4, V = 4: 16 accumulators, 4 loads of B and 4 broadcasts of A per step of k).
template <int R, int V>
RECALL_INLINE void block(const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                         int64_t ldc, int64_t k, bool accumulate) {
  Vec c[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v)
      c[r][v] = accumulate ? row_math::load(C + r * ldc + v * kLanes) : row_math::splat(0.0f);
  for (int64_t p = 0; p < k; ++p) {
    Vec b[V];
    for (int v = 0; v < V; ++v) b[v] = row_math::load(B + p * ldb + v * kLanes);
    for (int r = 0; r < R; ++r) {
      const Vec a = row_math::splat(A[r * lda + p]);
      for (int v = 0; v < V; ++v) c[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) row_math::store(C + r * ldc + v * kLanes, c[r][v]);
}

// Panels of V vectors of columns by kDepth rows of B outside, row blocks inside: a panel (at most
// 64 x 64 floats, 16 KiB) stays in L1 while every row block passes over it. C is stored and
// reloaded between depth steps, so every element still sums over k in order.
constexpr int64_t kDepth = 64;

template <int V>
RECALL_INLINE void panel(const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                         int64_t ldc, int64_t m, int64_t k, bool accumulate) {
  for (int64_t p0 = 0; p0 < k; p0 += kDepth) {
    const int64_t depth = std::min(kDepth, k - p0);
    const bool add = accumulate || p0 > 0;
    int64_t i = 0;
    for (; i + 4 <= m; i += 4)
      block<4, V>(A + i * lda + p0, lda, B + p0 * ldb, ldb, C + i * ldc, ldc, depth, add);
    for (; i < m; ++i)
      block<1, V>(A + i * lda + p0, lda, B + p0 * ldb, ldb, C + i * ldc, ldc, depth, add);
  }
}

RECALL_VECTOR_CLONES void gemm(const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                               int64_t ldc, int64_t m, int64_t n, int64_t k, bool accumulate) {
  if (k == 0) {
    for (int64_t i = 0; i < m && !accumulate; ++i) std::fill(C + i * ldc, C + i * ldc + n, 0.0f);
    return;
  }
  int64_t j = 0;
  for (; j + 4 * kLanes <= n; j += 4 * kLanes)
    panel<4>(A, lda, B + j, ldb, C + j, ldc, m, k, accumulate);
  for (; j + kLanes <= n; j += kLanes) panel<1>(A, lda, B + j, ldb, C + j, ldc, m, k, accumulate);
  for (; j < n; ++j)  // the last columns, one at a time, summed in the same order
    for (int64_t i = 0; i < m; ++i) {
      float s = accumulate ? C[i * ldc + j] : 0.0f;
      for (int64_t p = 0; p < k; ++p) s += A[i * lda + p] * B[p * ldb + j];
      C[i * ldc + j] = s;
    }
}

}  // namespace

void tile_gemm(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
               int64_t m, int64_t n, int64_t k, bool accumulate) {
  gemm(A, lda, B, ldb, C, ldc, m, n, k, accumulate);
}

}  // namespace recall
