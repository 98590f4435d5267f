// A small single-threaded float product for the probe's tiles: C (m, n) = (or +=) A (m, k) B (k,
// n), all row-major with leading dimensions. The probe runs it inside its own parallel region,
// where a BLAS that threads by itself (oneDNN's sgemm under OpenMP) spins in nested regions; this
// one never starts a thread. Each C element sums over k in order, so a tile's bits do not depend on
// which thread runs it.
#pragma once
#include <cstdint>

namespace recall {

void tile_gemm(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
               int64_t m, int64_t n, int64_t k, bool accumulate);

}  // namespace recall
