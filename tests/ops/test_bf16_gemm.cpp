// The bf16 products (precision = bf16, recall/ops/precision.h) against float64 products of the
// float32 operands, within the error bf16's 8-bit significand allows, forward and backward.
//
// Rounding to nearest at 8 bits moves each operand by at most u = 2^-8 of itself, so a product
// a b moves by at most (2u + u^2) |a| |b|; float32 accumulation over K terms adds at most
// K 2^-24 sum |a| |b|. Each element of C = A B is then within
//   tol_ij = (2^-7 + 2^-16 + K 2^-24) (|A| |B|)_ij
// of the exact product. The error must also be far above float32's, or the fp32 path ran.
#include <gtest/gtest.h>

#include <cmath>

#include "fast_gemm_test_util.h"
#include "recall/ops/gemm.h"
#include "recall/ops/precision.h"

namespace recall {
namespace {

// The bound above for C = A B (A (..., M, K), B (..., K, N)), from float64 magnitudes.
torch::Tensor bf16_bound(const torch::Tensor& a, const torch::Tensor& b) {
  const double K = static_cast<double>(a.size(-1));
  const double rel = std::ldexp(1.0, -7) + std::ldexp(1.0, -16) + K * std::ldexp(1.0, -24);
  return rel * torch::matmul(a.abs().to(torch::kFloat64), b.abs().to(torch::kFloat64));
}

// |got - exact| <= bound everywhere, and the largest error, relative to the bound, is far above
// what float32 products would make (a bf16 product of random operands uses a good part of it).
void expect_bf16(const torch::Tensor& got, const torch::Tensor& exact, const torch::Tensor& bound,
                 const std::string& what) {
  ASSERT_EQ(got.sizes(), exact.sizes()) << what;
  const auto err = (got.to(torch::kFloat64) - exact).abs();
  EXPECT_TRUE((err <= bound).all().item<bool>())
      << what << ": worst error over the bound " << (err / bound).max().item<double>();
  EXPECT_GT((err / bound).max().item<double>(), 0.02) << what << ": no bf16 rounding seen";
}

TEST(Bf16Gemm, MatmulWithinTheRoundingBoundForwardAndBackward) {
  RECALL_BF16_OR_SKIP();
  const ScopedPrecision bf16(Precision::kBf16);
  const int64_t calls = fast_calls(FastKernel::kBf16Gemm),
                fp32_calls = fast_calls(FastKernel::kSgemm);
  torch::manual_seed(3);
  struct Case {
    torch::Tensor a, b;
  };
  const Case cases[] = {{torch::randn({37, 64}), torch::randn({64, 23})},
                        {torch::randn({64, 37}).t(), torch::randn({23, 64}).t()},
                        {torch::randn({5, 11, 96}), torch::randn({5, 13, 96}).transpose(1, 2)}};
  for (const auto& c : cases) {
    auto a = c.a.detach().requires_grad_(true), b = c.b.detach().requires_grad_(true);
    const auto y = fast_matmul(a, b, 0.5);
    const auto a64 = c.a.to(torch::kFloat64), b64 = c.b.to(torch::kFloat64);
    expect_bf16(y, 0.5 * torch::matmul(a64, b64), 0.5 * bf16_bound(c.a, c.b), "forward");
    const auto g = torch::randn_like(y);
    (y * g).sum().backward();
    // ga = 0.5 g b^T, gb = 0.5 a^T g: products of bf16-rounded g and b, a and g
    const auto bt = c.b.transpose(-1, -2), at = c.a.transpose(-1, -2);
    expect_bf16(a.grad(), 0.5 * torch::matmul(g.to(torch::kFloat64), bt.to(torch::kFloat64)),
                0.5 * bf16_bound(g, bt), "grad a");
    expect_bf16(b.grad(), 0.5 * torch::matmul(at.to(torch::kFloat64), g.to(torch::kFloat64)),
                0.5 * bf16_bound(at, g), "grad b");
  }
  EXPECT_GE(fast_calls(FastKernel::kBf16Gemm) - calls, 9) << "the bf16 GEMM did not run";
  EXPECT_EQ(fast_calls(FastKernel::kSgemm), fp32_calls) << "an fp32 product ran under bf16";
}

TEST(Bf16Gemm, LinearAndLinearGeluWithinTheRoundingBound) {
  RECALL_BF16_OR_SKIP();
  const ScopedPrecision bf16(Precision::kBf16);
  const int64_t calls = fast_calls(FastKernel::kBf16Gemm);
  torch::manual_seed(4);
  const auto x = torch::randn({3, 9, 48}), w = torch::randn({40, 48}), bias = torch::randn({40});
  const auto x2 = x.reshape({-1, 48});
  const auto exact = torch::matmul(x2.to(torch::kFloat64), w.t().to(torch::kFloat64)) +
                     bias.to(torch::kFloat64);  // (27, 40)
  const auto bound = bf16_bound(x2, w.t());
  expect_bf16(fast_linear(x, w, bias).reshape({-1, 40}), exact, bound, "linear");
  // GELU moves by at most its slope (below 1.13) times the pre-activation's error
  expect_bf16(fast_linear_gelu(x, w, bias).reshape({-1, 40}), torch::gelu(exact), 1.13 * bound,
              "linear_gelu");
  EXPECT_GE(fast_calls(FastKernel::kBf16Gemm) - calls, 2) << "the bf16 GEMM did not run";
}

// The linear's backward rounds its incoming gradient g once and sums it for the bias in the same
// pass: the weight gradient is the product of torch's bf16 roundings of g and x (exact products,
// float32 sums: within K 2^-23 of their magnitudes, where a wrong rounding would be off by 2^-9),
// and the bias gradient g's column sums in float32 (within n 2^-23 of theirs). 40 columns: a ragged
// last vector.
TEST(Bf16Gemm, LinearBackwardRoundsTheGradientOnceAndSumsItForTheBias) {
  RECALL_BF16_OR_SKIP();
  const ScopedPrecision bf16(Precision::kBf16);
  torch::manual_seed(5);
  const auto x = torch::randn({70, 48}), g = torch::randn({70, 40});
  const auto w = torch::randn({40, 48}).requires_grad_(true);
  const auto bias = torch::randn({40}).requires_grad_(true);
  fast_linear(x, w, bias).backward(g);
  auto f64 = [](const torch::Tensor& t) { return t.to(torch::kFloat64); };
  auto b16 = [&](const torch::Tensor& t) { return f64(t.to(torch::kBFloat16)); };
  const auto gw_exact = torch::matmul(b16(g).t(), b16(x));  // (40, 48)
  const auto gw_bound = 70 * std::ldexp(1.0, -23) * torch::matmul(b16(g).abs().t(), b16(x).abs());
  EXPECT_TRUE(((f64(w.grad()) - gw_exact).abs() <= gw_bound).all().item<bool>())
      << "the weight gradient is not the product of the rounded operands";
  const auto gb_exact = f64(g).sum(0), gb_bound = 70 * std::ldexp(1.0, -23) * f64(g).abs().sum(0);
  EXPECT_TRUE(((f64(bias.grad()) - gb_exact).abs() <= gb_bound).all().item<bool>())
      << "worst bias error " << (f64(bias.grad()) - gb_exact).abs().max().item<double>();
}

TEST(Bf16Gemm, Fp32IsUntouchedAndTheKernelIsNamed) {
  const int64_t calls = fast_calls(FastKernel::kBf16Gemm);
  EXPECT_EQ(matmul_precision(), Precision::kFp32);
  (void)fast_matmul(torch::randn({8, 8}), torch::randn({8, 8}));
  EXPECT_EQ(fast_calls(FastKernel::kBf16Gemm), calls) << "bf16 ran under fp32";
  EXPECT_EQ(precision_from_string("bf16"), Precision::kBf16);
  EXPECT_THROW(precision_from_string("fp16"), std::invalid_argument);
  const std::string report = bf16_kernel_report();
  if (cpu_bf16_units().empty()) {
    EXPECT_EQ(report.rfind("none (", 0), 0u) << report;
  } else if (!bf16_gemm_name().empty()) {
    EXPECT_EQ(report, bf16_gemm_name() + " on " + cpu_bf16_units());
  }
}

}  // namespace
}  // namespace recall
