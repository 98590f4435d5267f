// The oneDNN-backed products against torch's, values and gradients, on strided views too.
#include <gtest/gtest.h>

#include "fast_gemm_test_util.h"
#include "recall/ops/gemm.h"
#include "recall/ops/precision.h"

namespace recall {
namespace {

void expect_close(const torch::Tensor& a, const torch::Tensor& b, double tol) {
  ASSERT_EQ(a.sizes(), b.sizes());
  EXPECT_LT((a - b).abs().max().item<double>(), tol);
}

// Compares fast_matmul(a, b, alpha) with torch's, forward and backward (float32 tolerance).
void check_matmul(torch::Tensor a, torch::Tensor b, double alpha) {
  a = a.detach().requires_grad_(true);
  b = b.detach().requires_grad_(true);
  auto a2 = a.detach().clone().requires_grad_(true), b2 = b.detach().clone().requires_grad_(true);
  auto c = fast_matmul(a, b, alpha), c2 = torch::matmul(a2, b2) * alpha;
  expect_close(c, c2, 1e-4);
  auto g = torch::randn_like(c2);
  (c * g).sum().backward();
  (c2 * g).sum().backward();
  expect_close(a.grad(), a2.grad(), 1e-4);
  expect_close(b.grad(), b2.grad(), 1e-4);
}

TEST(ModelGemm, MatchesTorchOnContiguousAndStridedOperands) {
  RECALL_FAST_GEMM_OR_SKIP();
  const int64_t calls = fast_calls(FastKernel::kSgemm);
  torch::manual_seed(5);
  check_matmul(torch::randn({37, 19}), torch::randn({19, 23}), 1.0);
  check_matmul(torch::randn({19, 37}).t(), torch::randn({23, 19}).t(), 0.5);  // both transposed
  check_matmul(torch::randn({6, 11, 9}), torch::randn({6, 13, 9}).transpose(1, 2), 0.25);
  check_matmul(torch::randn({11, 6, 9}).transpose(0, 1), torch::randn({6, 9, 13}), 1.0);
  check_matmul(torch::randn({6, 11, 18}).narrow(2, 3, 9), torch::randn({6, 9, 13}), 2.0);
  check_matmul(torch::randn({4, 5, 8, 2}).select(3, 0),  // no unit stride: copied
               torch::randn({4, 8, 3}).transpose(1, 2).contiguous().transpose(1, 2), 1.0);
  EXPECT_GT(fast_calls(FastKernel::kSgemm), calls) << "the fast sgemm did not run";
}

TEST(ModelGemm, EmptyAndDoubleOperands) {
  EXPECT_EQ(fast_matmul(torch::randn({0, 4}), torch::randn({4, 3})).sizes(),
            (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(
      torch::equal(fast_matmul(torch::randn({2, 0}), torch::randn({0, 3})), torch::zeros({2, 3})));
  auto a = torch::randn({3, 4}, torch::kFloat64), b = torch::randn({4, 5}, torch::kFloat64);
  expect_close(fast_matmul(a, b, 3.0), torch::matmul(a, b) * 3.0, 1e-12);
}

TEST(ModelGemm, LinearMatchesTorchValuesAndGradients) {
  RECALL_FAST_GEMM_OR_SKIP();
  const int64_t calls = fast_calls(FastKernel::kSgemm);
  torch::manual_seed(6);
  for (bool with_bias : {true, false}) {
    std::array<std::vector<torch::Tensor>, 2> grads;
    std::array<torch::Tensor, 2> y;
    auto g = torch::randn({2, 5, 3});
    for (int fast = 0; fast < 2; ++fast) {
      torch::manual_seed(8);
      auto x = torch::randn({2, 5, 7}).requires_grad_(true);
      auto w = torch::randn({3, 7}).requires_grad_(true);
      auto b = with_bias ? torch::randn({3}).requires_grad_(true) : torch::Tensor();
      y[fast] = fast ? fast_linear(x, w, b) : torch::nn::functional::linear(x, w, b);
      if (fast) {
        EXPECT_FALSE(y[fast].is_view());  // its own output: a residual adds into it
      }
      (y[fast] * g).sum().backward();
      grads[fast] = {x.grad(), w.grad()};
      if (with_bias) grads[fast].push_back(b.grad());
    }
    expect_close(y[0], y[1], 1e-5);
    for (size_t i = 0; i < grads[0].size(); ++i) expect_close(grads[0][i], grads[1][i], 1e-4);
  }
  EXPECT_GT(fast_calls(FastKernel::kSgemm), calls) << "the fast sgemm did not run";
}

TEST(ModelGemm, LinearGeluMatchesReferenceValuesAndGradients) {
  RECALL_FAST_GEMM_OR_SKIP();
  const int64_t calls = fast_calls(FastKernel::kSgemm);
  torch::manual_seed(9);
  std::array<std::vector<torch::Tensor>, 2> grads;
  std::array<torch::Tensor, 2> y;
  auto g = torch::randn({3, 11, 37});
  for (int fast = 0; fast < 2; ++fast) {
    torch::manual_seed(12);
    auto x = (torch::randn({3, 11, 20}) * 2).requires_grad_(true);  // pre-activations up to ~15
    auto w = torch::randn({37, 20}).requires_grad_(true);
    auto b = torch::randn({37}).requires_grad_(true);
    y[fast] = fast ? fast_linear_gelu(x, w, b) : linear_gelu_reference(x, w, b);
    (y[fast] * g).sum().backward();
    grads[fast] = {x.grad(), w.grad(), b.grad()};
  }
  expect_close(y[0], y[1], 1e-4);  // |y| ~ 15: float32 rounding of the product
  for (size_t i = 0; i < grads[0].size(); ++i) expect_close(grads[0][i], grads[1][i], 1e-3);
  // float64 input takes the reference path.
  auto xd = torch::randn({4, 5}, torch::kFloat64), wd = torch::randn({3, 5}, torch::kFloat64);
  auto bd = torch::randn({3}, torch::kFloat64);
  EXPECT_TRUE(torch::allclose(fast_linear_gelu(xd, wd, bd), linear_gelu_reference(xd, wd, bd)));
  EXPECT_GT(fast_calls(FastKernel::kSgemm), calls) << "the fast sgemm did not run";
}

// The MLP as one function (fast_mlp_gelu) against fast_linear_gelu then fast_linear: the same
// bits, values and all five gradients, in fp32 and (where the CPU runs it) bf16, where the pair
// rounds the float32 hidden layer that the one function writes straight as bf16. A ragged hidden
// width (37) and no second bias too. The graph's node names the function that ran.
TEST(ModelGemm, MlpGeluIsLinearGeluThenLinearBitForBit) {
  RECALL_FAST_GEMM_OR_SKIP();
  std::vector<Precision> precisions{Precision::kFp32};
  if (!cpu_bf16_units().empty() && !bf16_gemm_name().empty())
    precisions.push_back(Precision::kBf16);
  for (const Precision p : precisions) {
    for (const bool b2_on : {true, false}) {
      SCOPED_TRACE(to_string(p) + (b2_on ? ", second bias" : ", no second bias"));
      const ScopedPrecision precision(p);
      std::array<std::vector<torch::Tensor>, 2> got;
      auto g = torch::randn({3, 11, 24});
      for (int one = 0; one < 2; ++one) {
        torch::manual_seed(13);
        auto x = torch::randn({3, 11, 20}).requires_grad_(true);
        auto w1 = torch::randn({37, 20}).requires_grad_(true), b1 = torch::randn({37});
        auto w2 = torch::randn({24, 37}).requires_grad_(true), b2 = torch::randn({24});
        b1.requires_grad_(true);
        b2.requires_grad_(true);
        const auto bias2 = b2_on ? b2 : torch::Tensor();
        auto y = one ? fast_mlp_gelu(x, w1, b1, w2, bias2)
                     : fast_linear(fast_linear_gelu(x, w1, b1), w2, bias2);
        if (one) {  // the function's own output, not a view (the residual adds into it)
          EXPECT_NE(y.grad_fn()->name().find("MlpGeluFunction"), std::string::npos)
              << y.grad_fn()->name();
          EXPECT_FALSE(y.is_view());
        }
        (y * g).sum().backward();
        got[one] = {y, x.grad(), w1.grad(), b1.grad(), w2.grad()};
        if (b2_on) got[one].push_back(b2.grad());
      }
      for (size_t i = 0; i < got[0].size(); ++i)
        EXPECT_TRUE(torch::equal(got[0][i], got[1][i])) << "output or gradient " << i;
    }
  }
}

}  // namespace
}  // namespace recall
