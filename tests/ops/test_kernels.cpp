// RECALL_KERNELS and the scoped override: the fast paths of core run torch's ops under reference.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "recall/core/error.h"
#include "recall/ops/gemm.h"
#include "recall/ops/kernels.h"

namespace recall {
namespace {

TEST(Kernels, EnvironmentValues) {
  const bool before = reference_kernels();  // read (and kept) before the variable is changed
  const char* saved = std::getenv("RECALL_KERNELS");
  const std::string keep = saved ? saved : "";
  auto with = [](const char* v) {
    ::setenv("RECALL_KERNELS", v, 1);
    return kernels_from_environment();
  };
  EXPECT_EQ(with("fast"), Kernels::kFast);
  EXPECT_EQ(with(""), Kernels::kFast);
  EXPECT_EQ(with("reference"), Kernels::kReference);
  try {
    with("slow");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "RECALL_KERNELS = 'slow': must be fast (the default) or reference");
  }
  if (saved)
    ::setenv("RECALL_KERNELS", keep.c_str(), 1);
  else
    ::unsetenv("RECALL_KERNELS");
  EXPECT_EQ(reference_kernels(), before);  // read once
}

TEST(Kernels, ScopedOverrideNestsAndRestores) {
  const bool outer = reference_kernels();
  {
    ScopedKernels reference(Kernels::kReference);
    EXPECT_TRUE(reference_kernels());
    {
      ScopedKernels fast(Kernels::kFast);
      EXPECT_FALSE(reference_kernels());
    }
    EXPECT_TRUE(reference_kernels());
  }
  EXPECT_EQ(reference_kernels(), outer);
}

// Under reference the GEMM entry points are torch's ops themselves: equal, not merely close.
TEST(Kernels, ReferenceGemmIsTorchsOps) {
  ScopedKernels reference(Kernels::kReference);
  torch::manual_seed(3);
  auto a = torch::randn({5, 7}), b = torch::randn({7, 3}), w = torch::randn({4, 7}),
       bias = torch::randn({4});
  EXPECT_TRUE(torch::equal(fast_matmul(a, b, 2.0), torch::matmul(a, b) * 2.0));
  EXPECT_TRUE(torch::equal(fast_linear(a, w, bias), torch::matmul(a, w.t()) + bias));
  EXPECT_TRUE(torch::equal(fast_linear_gelu(a, w, bias), linear_gelu_reference(a, w, bias)));
}

TEST(Kernels, KernelReportNamesEachKernel) {
  const std::string r = kernel_report();
  for (const char* key : {"gemm: ", "fast sgemm: ", "torch blas: ", "libtorch: ", "cuda: "})
    EXPECT_NE(r.find(key), std::string::npos) << key << " in\n" << r;
  EXPECT_NE(r.find("fast sgemm: " +
                   (fast_gemm_available() ? fast_gemm_name() : std::string("not found"))),
            std::string::npos);
}

}  // namespace
}  // namespace recall
