// Tests of a fast path that needs a fast sgemm (oneDNN's dnnl_sgemm or MKL's, recall/ops/gemm.h)
// start with RECALL_FAST_GEMM_OR_SKIP(). Where the fast GEMM is required
// (RECALL_REQUIRE_FAST_GEMM=1, which ctest sets when the CMake option of that name is on, as it is
// on x86-64), a missing sgemm fails the test instead of skipping it: the fast-versus-reference
// comparison would otherwise compare the reference with itself. Such a test also checks with
// fast_calls(FastKernel::kSgemm) that the fast sgemm is what ran.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "recall/ops/gemm.h"
#include "recall/ops/kernels.h"
#include "recall/ops/precision.h"

namespace recall::test {

// A fused kernel's calls since `before` (fast_calls): `n` when the fast paths run, none in a rerun
// on the references (RECALL_KERNELS=reference), where the same test compares torch with torch.
inline void expect_fast_calls(FastKernel k, int64_t before, int64_t n) {
  const int64_t ran = fast_calls(k) - before;
  if (reference_kernels())
    EXPECT_EQ(ran, 0) << to_string(k) << " ran under RECALL_KERNELS=reference";
  else
    EXPECT_EQ(ran, n) << "the fused " << to_string(k) << " did not run as often as asked";
}

// Whether bf16 products run here: bf16 instructions and a bf16 GEMM (what RECALL_BF16_OR_SKIP
// needs beside the fast sgemm); for tests that add a bf16 case where they can.
inline bool bf16_products_here() {
  return !cpu_bf16_units().empty() && !bf16_gemm_name().empty();
}

inline bool fast_gemm_required() {
  const char* v = std::getenv("RECALL_REQUIRE_FAST_GEMM");
  return v && std::string(v) == "1";
}

}  // namespace recall::test

#define RECALL_FAST_GEMM_OR_SKIP()                                                              \
  do {                                                                                          \
    if (!recall::fast_gemm_available()) {                                                       \
      if (recall::test::fast_gemm_required())                                                   \
        FAIL() << "no fast sgemm was found, and RECALL_REQUIRE_FAST_GEMM=1 says one must be";   \
      GTEST_SKIP() << "no fast sgemm: the reference is used (RECALL_REQUIRE_FAST_GEMM=1 would " \
                      "fail here)";                                                             \
    }                                                                                           \
  } while (0)

// Tests of the bf16 products (recall/ops/precision.h) start with RECALL_BF16_OR_SKIP(): they need
// the fast sgemm (as above), bf16 instructions and a bf16 GEMM, and skip naming what is missing.
#define RECALL_BF16_OR_SKIP()                                                    \
  do {                                                                           \
    RECALL_FAST_GEMM_OR_SKIP();                                                  \
    if (!recall::test::bf16_products_here())                                     \
      GTEST_SKIP() << "no bf16 products here: " << recall::bf16_kernel_report(); \
  } while (0)
