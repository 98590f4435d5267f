// The vectorised row kernels against std::exp and torch's softmax, including ragged row lengths.
#include <gtest/gtest.h>

#include <cmath>

#include "recall/ops/gemm.h"
#include "recall/ops/row_math.h"

namespace recall {
namespace {

TEST(ModelRowMath, ExpMatchesStdExpOnTheSoftmaxRange) {
  double worst = 0.0;
  for (int i = 0; i <= 100000; ++i) {
    const float x = -87.0f * static_cast<float>(i) / 100000.0f;
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(row_math::exp_nonpositive(x) - want) / want);
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_LT(row_math::exp_nonpositive(-1000.0f), 1e-37f);  // clamped at e^-87, still tiny
  EXPECT_GE(row_math::exp_nonpositive(-1000.0f), 0.0f);
}

TEST(ModelRowMath, CausalSoftmaxRowsMatchesMaskedSoftmax) {
  torch::manual_seed(3);
  for (auto [rows, w, first] :
       {std::array<int64_t, 3>{5, 37, 20}, {64, 256, 192}, {3, 3, 0}, {4, 40, 36}, {2, 17, 100}}) {
    auto logits = torch::randn({rows, w}) * 30;  // wide range: exercises the max shift and clamp
    auto mask = torch::ones({rows, w}, torch::kBool).triu(first + 1);  // hidden keys
    auto want = torch::softmax(logits.masked_fill(mask, -INFINITY), 1);
    auto got = logits.clone();
    row_math::causal_softmax_rows(got.data_ptr<float>(), rows, w, first);
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-6) << rows << "x" << w << " " << first;
    EXPECT_EQ(got.masked_select(mask).abs().sum().item<float>(), 0.0f);
    // With the bf16 copy: the same weights, and beside them their bfloat16 values (the tail's too)
    auto again = logits.clone(), rounded = torch::full({rows, w}, 7.0f);
    row_math::causal_softmax_rows(again.data_ptr<float>(), rows, w, first,
                                  rounded.data_ptr<float>());
    EXPECT_TRUE(torch::equal(again, got));
    EXPECT_TRUE(torch::equal(rounded, got.to(torch::kBFloat16).to(torch::kFloat32)));
  }
}

TEST(ModelRowMath, SoftmaxBackwardRowsMatchesAutograd) {
  torch::manual_seed(4);
  for (auto [rows, w] : {std::pair<int64_t, int64_t>{7, 45}, {64, 128}, {1, 1}}) {
    auto logits = torch::randn({rows, w}, torch::requires_grad());
    auto p = torch::softmax(logits, 1);
    auto g = torch::randn({rows, w});
    (p * g).sum().backward();
    auto got = g.clone();
    row_math::softmax_backward_rows(p.detach().contiguous().data_ptr<float>(),
                                    got.data_ptr<float>(), rows, w);
    EXPECT_LT((got - logits.grad()).abs().max().item<double>(), 1e-5);
  }
}

// From weights kept as bfloat16 bits: the float32 path's result on the widened weights, bit for
// bit, rounded to bf16 (ragged rows: a vector tail).
TEST(ModelRowMath, SoftmaxBackwardRowsFromBf16BitsIsTheFloatPathOnTheirValues) {
  torch::manual_seed(6);
  const int64_t rows = 5, w = 37;
  const auto p = torch::softmax(torch::randn({rows, w}), 1).to(torch::kBFloat16);
  const auto g = torch::randn({rows, w});
  auto want = g.clone();
  auto wp = torch::empty({rows, w}, torch::kBFloat16),
       wg = torch::empty({rows, w}, torch::kBFloat16);
  auto bits = [](torch::Tensor& t) {
    return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>());
  };
  row_math::softmax_backward_rows(p.to(torch::kFloat32).contiguous().data_ptr<float>(),
                                  want.data_ptr<float>(), rows, w, bits(wp), bits(wg));
  auto got = torch::empty({rows, w}, torch::kBFloat16), G = g.clone();
  auto pc = p.contiguous();
  row_math::softmax_backward_rows(bits(pc), G.data_ptr<float>(), rows, w, bits(got));
  EXPECT_TRUE(torch::equal(got, wg));
  EXPECT_TRUE(torch::equal(G, g));   // left as it was
  EXPECT_TRUE(torch::equal(wp, p));  // the float path's rounding of the widened weights: themselves
}

TEST(ModelRowMath, BiasGeluRowsMatchTorchGeluAndItsBackward) {
  torch::manual_seed(5);
  const int64_t n = 9, w = 35;  // ragged: 2 vectors and 3 leftover columns per row
  auto x = torch::randn({n, w}) * 4;
  x[0][0] = 0.0f;  // exact points and the tails, where erf saturates
  x[0][1] = -12.0f;
  x[0][2] = 12.0f;
  auto bias = torch::randn({w}), g = torch::randn({n, w});
  auto d = torch::empty({n, w}), y = torch::empty({n, w}), gs = torch::empty({n, w});
  row_math::bias_gelu_rows(x.data_ptr<float>(), bias.data_ptr<float>(), d.data_ptr<float>(),
                           y.data_ptr<float>(), n, w);
  auto want_s = (x + bias).to(torch::kFloat64);
  EXPECT_LT((y - torch::gelu(want_s)).abs().max().item<double>(), 1e-6 * 12);
  // d is the derivative gelu'(x + bias), all the backward reads
  const auto want_d = torch::gelu_backward(torch::ones_like(want_s), want_s);
  EXPECT_LT((d - want_d).abs().max().item<double>(), 1e-6);
  auto gbias = torch::ones({w});  // accumulates onto what is there
  row_math::gelu_backward_rows(g.data_ptr<float>(), d.data_ptr<float>(), gs.data_ptr<float>(),
                               gbias.data_ptr<float>(), n, w);
  auto want_gs = torch::gelu_backward(g.to(torch::kFloat64), want_s);
  EXPECT_LT((gs - want_gs).abs().max().item<double>(), 1e-5);
  EXPECT_TRUE(torch::equal(gs, g * d));  // one multiply
  EXPECT_LT((gbias - 1 - want_gs.sum(0)).abs().max().item<double>(), 1e-4);
  // Written as bfloat16 (what the bf16 products take): torch's rounding of the float32 values,
  // bit for bit, and the same bias sums (of the float32 values).
  auto gs_bf16 = torch::empty({n, w}, torch::kBFloat16);
  auto gbias_bf16 = torch::ones({w});
  row_math::gelu_backward_rows(g.data_ptr<float>(), d.data_ptr<float>(),
                               reinterpret_cast<uint16_t*>(gs_bf16.data_ptr<at::BFloat16>()),
                               gbias_bf16.data_ptr<float>(), n, w);
  EXPECT_TRUE(torch::equal(gs_bf16, gs.to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(gbias_bf16, gbias));
}

TEST(ModelRowMath, BiasRowsAndColumnSumsMatchTorch) {
  torch::manual_seed(9);
  // rows not a multiple of the four summed at a time, widths with and without a vector tail
  for (auto [n, w] : {std::array<int64_t, 2>{37, 53}, {8, 16}, {3, 5}, {1, 384}}) {
    const auto x = torch::randn({n, w}), bias = torch::randn({w});
    auto y = x.clone();
    row_math::add_bias_rows(y.data_ptr<float>(), bias.data_ptr<float>(), n, w);
    EXPECT_TRUE(torch::equal(y, x + bias)) << n << "x" << w;  // one rounding per element either way
    auto sums = torch::full({w}, 0.5f);
    row_math::add_column_sums(x.data_ptr<float>(), sums.data_ptr<float>(), n, w);
    EXPECT_LT((sums - (x.sum(0) + 0.5f)).abs().max().item<double>(), 1e-5 * n) << n << "x" << w;
  }
}

TEST(ModelRowMath, RoundToBf16IsTorchsRoundingBitForBit) {
  torch::manual_seed(5);
  // random values over many binades, ties both ways (bit 15 set, the rest zero, the kept value
  // odd and even), the largest values below and at the overflow, denormals, zeros and infinities,
  // in a ragged length (a vector tail); a NaN last, whose bits torch's own paths spell in two ways
  // (0x7FC0 scalar, 0xFFFF vectorised)
  auto x = torch::cat(
      {torch::randn({1000}) * torch::exp(torch::randn({1000}) * 20),
       torch::tensor({1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -(1.0f + 1.0f / 256), 3.3895e38f,
                      3.4028e38f, 1e-40f, -1e-45f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN})});
  auto got = torch::empty({x.numel()}, torch::kInt16);
  row_math::round_to_bf16(x.data_ptr<float>(), reinterpret_cast<uint16_t*>(got.data_ptr<int16_t>()),
                          x.numel());
  const int64_t n = x.numel() - 1;
  const auto want = x.narrow(0, 0, n).to(torch::kBFloat16).view(torch::kInt16);
  EXPECT_TRUE(got.narrow(0, 0, n).equal(want))
      << "differs at " << got.narrow(0, 0, n).ne(want).nonzero().numel() << " places";
  EXPECT_TRUE(std::isnan(got.narrow(0, n, 1).view(torch::kBFloat16).item<float>()));

  // the same rounding as float32 values (the attention's operands under bf16): torch's rounding
  // widened back, bit for bit, and the tensor form agrees through a strided view
  auto values = torch::empty({x.numel()}, torch::kFloat32);
  row_math::round_to_bf16(x.data_ptr<float>(), values.data_ptr<float>(), x.numel());
  const auto want_values = x.narrow(0, 0, n).to(torch::kBFloat16).to(torch::kFloat32);
  EXPECT_TRUE(values.narrow(0, 0, n).view(torch::kInt32).equal(want_values.view(torch::kInt32)));
  EXPECT_TRUE(std::isnan(values[n].item<float>()));
  const auto strided = x.narrow(0, 0, 1002).view({334, 3}).narrow(1, 1, 2);  // rows 3 apart
  EXPECT_TRUE(round_to_bf16(strided, torch::kFloat32)
                  .equal(strided.to(torch::kBFloat16).to(torch::kFloat32)));
}

}  // namespace
}  // namespace recall
