// A small single-threaded float product for the probe's tiles: C (m, n) = (or +=) A (m, k) B (k,
// n). B and C are row-major with leading dimensions; A's element (i, p) is A[i ar + p ac], so a
// row-major A has (ar, ac) = (lda, 1) and a transposed one (1, lda). The probe runs it inside its
// own parallel region, where a BLAS that threads by itself (oneDNN's sgemm under OpenMP) spins in
// nested regions; this one never starts a thread. Each C element sums over k in order, so a tile's
// bits do not depend on which thread runs it. On AVX-512 its own kernel runs; elsewhere the
// portable one, compiled per ISA. Both use fused multiply-adds where the ISA has them and agree bit
// for bit on AVX-512; the AVX2 build of the portable kernel rounds each product (its target has no
// FMA).
#pragma once
#include <cstdint>

namespace recall {

void tile_gemm(const float* A, int64_t ar, int64_t ac, const float* B, int64_t ldb, float* C,
               int64_t ldc, int64_t m, int64_t n, int64_t k, bool accumulate);

// Whether tile_gemm runs its AVX-512 kernel here (GCC builds on CPUs with AVX-512).
bool tile_gemm_avx512();

// The same product on the portable kernel alone, for the tests that compare the two.
void tile_gemm_portable(const float* A, int64_t ar, int64_t ac, const float* B, int64_t ldb,
                        float* C, int64_t ldc, int64_t m, int64_t n, int64_t k, bool accumulate);

}  // namespace recall
