// The blocked causal attention kernel against its plain-torch reference
// (causal_attention_reference): values and gradients.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fast_gemm_test_util.h"
#include "recall/core/threads.h"
#include "recall/ops/causal_attention.h"
#include "recall/ops/gemm.h"
#include "recall/ops/precision.h"

namespace recall {
namespace {

// The reference of what causal_attention(q, k, v, N, alpha) computes: logits alpha q . k
// everywhere.
torch::Tensor reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        int64_t N, double alpha) {
  const auto scale = torch::full({1, q.size(1)}, alpha, q.options());  // (1, T)
  return causal_attention_reference(q, k, v, scale, N).y;
}

// (y, gq, gk, gv) of the kernel (fast) or the reference, on the same seeded inputs in `dtype`.
std::vector<torch::Tensor> attention_and_grads(bool fast, torch::Dtype dtype, int64_t n, int64_t T,
                                               int64_t N, int64_t d, double alpha) {
  torch::manual_seed(7);
  // q is a strided view, as the attention passes it (rows 3 H d apart); H = 2.
  auto q = torch::randn({n, T, 3, 2, d}).select(2, 1), k = torch::randn({n, N + T, 2, d});
  auto v = torch::randn({n, N + T, 2, d}), g = torch::randn({n, T, 2, d});
  auto qi = q.to(dtype).detach().requires_grad_(true), ki = k.to(dtype).requires_grad_(true),
       vi = v.to(dtype).requires_grad_(true);
  auto y = fast ? causal_attention(qi, ki, vi, N, alpha) : reference(qi, ki, vi, N, alpha);
  (y * g.to(dtype)).sum().backward();
  return {y.detach(), qi.grad(), ki.grad(), vi.grad()};
}

// Max abs differences of (y, gq, gk, gv) between a and b.
std::array<double, 4> max_errors(const std::vector<torch::Tensor>& a,
                                 const std::vector<torch::Tensor>& b) {
  std::array<double, 4> err{};
  for (int i = 0; i < 4; ++i)
    err[i] = (a[i].to(torch::kFloat64) - b[i].to(torch::kFloat64)).abs().max().item<double>();
  return err;
}

// Max abs differences of (y, gq, gk, gv) between the kernel and the reference, in float32.
std::array<double, 4> kernel_errors(int64_t n, int64_t T, int64_t N, int64_t d, double alpha) {
  return max_errors(attention_and_grads(true, torch::kFloat32, n, T, N, d, alpha),
                    attention_and_grads(false, torch::kFloat32, n, T, N, d, alpha));
}

TEST(ModelCausalAttention, KernelMatchesReferenceValuesAndGradients) {
  RECALL_FAST_GEMM_OR_SKIP();
  const int64_t calls = fast_calls(FastKernel::kSgemm);
  // T spans one block, several blocks and a ragged last block; with and without memories.
  for (auto [T, N] : {std::pair<int64_t, int64_t>{5, 0}, {64, 0}, {150, 0}, {150, 3}, {1, 2}}) {
    auto err = kernel_errors(3, T, N, 8, 0.35);
    for (int i = 0; i < 4; ++i) EXPECT_LT(err[i], 1e-4) << "T " << T << " N " << N << " part " << i;
  }
  // Wider heads (32, bench-gpt's; 49, odd) over whole blocks of keys (T 256: widths 64 to 256)
  // or ragged ones (T 200, N 5).
  for (auto [T, N, d] : {std::array<int64_t, 3>{256, 0, 32}, {200, 5, 49}}) {
    auto err = kernel_errors(2, T, N, d, 0.2);
    for (int i = 0; i < 4; ++i) EXPECT_LT(err[i], 1e-4) << "T " << T << " d " << d << " part " << i;
  }
  // Sharp attention (logits in the hundreds): the softmax's max shift and exp clamp. There the
  // float rounding of the logits (about 1e-5 at 300) moves the weights by as much, times alpha in
  // the gradients, and the result depends on the GEMM's order of summation: the kernel must be as
  // close to the float64 reference as the float32 reference is, within a factor of 2.
  const auto exact = attention_and_grads(false, torch::kFloat64, 2, 70, 1, 8, 40.0);
  const auto fast =
      max_errors(attention_and_grads(true, torch::kFloat32, 2, 70, 1, 8, 40.0), exact);
  const auto ref =
      max_errors(attention_and_grads(false, torch::kFloat32, 2, 70, 1, 8, 40.0), exact);
  for (int i = 0; i < 4; ++i)
    EXPECT_LE(fast[i], 2 * ref[i] + 1e-5) << "sharp, part " << i << ": the reference's " << ref[i];
  EXPECT_GT(fast_calls(FastKernel::kSgemm), calls) << "the kernel did not run the fast sgemm";
}

TEST(ModelCausalAttention, InferenceEqualsTheTrainingForward) {
  RECALL_FAST_GEMM_OR_SKIP();  // fails, not skips, where the fast GEMM is required
  const int64_t calls = fast_calls(FastKernel::kAttention);
  // Without gradients the kernel keeps no weights (one block's scratch per thread): the same
  // blocks and sums, so on one thread the same bits. On two, training runs its items in torch's
  // OpenMP region and inference on recall's own threads, and on an AMD EPYC without AVX-512
  // (oneDNN's AVX2 sgemm) training's forward moved by up to 6e-8 from its one-thread bits while
  // inference's did not: there within 1e-6. The reference's values within 1e-4 at both.
  for (int threads : {1, 2}) {
    set_threads(threads);
    for (auto [T, N] : {std::pair<int64_t, int64_t>{5, 0}, {150, 3}, {300, 0}}) {
      torch::manual_seed(9);
      auto q = torch::randn({2, T, 3, 2, 8}).select(2, 0), k = torch::randn({2, N + T, 2, 8});
      auto v = torch::randn({2, N + T, 2, 8});
      const auto trained = causal_attention(q.detach().requires_grad_(true), k, v, N, 0.4).detach();
      torch::NoGradGuard no_grad;
      const auto inferred = causal_attention(q, k, v, N, 0.4);
      if (threads == 1)
        EXPECT_TRUE(torch::equal(trained, inferred)) << "T " << T << " N " << N;
      else
        EXPECT_LE((trained - inferred).abs().max().item<double>(), 1e-6) << "T " << T << " N " << N;
      EXPECT_LT((inferred - reference(q, k, v, N, 0.4)).abs().max().item<double>(), 1e-4);
    }
  }
  set_threads(0);
  EXPECT_EQ(fast_calls(FastKernel::kAttention) - calls, 12) << "the fused attention did not run";
}

// The packed entry point runs the same blocks on the projection's three slices: its output and the
// gradient it writes as one tensor equal, bit for bit, those of causal_attention on the slices
// (whose gradients autograd gathers), in float32 and under bf16, and both are within 1e-4 of the
// reference in float32.
TEST(ModelCausalAttention, PackedEqualsTheKernelOnTheSlices) {
  RECALL_FAST_GEMM_OR_SKIP();
  std::vector<Precision> precisions{Precision::kFp32};
  if (test::bf16_products_here()) precisions.push_back(Precision::kBf16);
  for (const Precision p : precisions) {
    const ScopedPrecision scope(p);
    for (int64_t T : {5, 150, 256}) {
      torch::manual_seed(13);
      const auto z = torch::randn({2, T, 3, 2, 16}), g = torch::randn({2, T, 2, 16});
      const int64_t calls = fast_calls(FastKernel::kAttention);
      auto packed_in = z.clone().requires_grad_(true);
      auto packed = causal_attention_packed(packed_in, 0.3);
      (packed * g).sum().backward();
      EXPECT_EQ(fast_calls(FastKernel::kAttention) - calls, 1) << "the fused attention did not run";
      auto sliced_in = z.clone().requires_grad_(true);
      const auto parts = sliced_in.unbind(2);  // (B, T, H, d) each, strided
      auto sliced = causal_attention(parts[0], parts[1], parts[2], 0, 0.3);
      (sliced * g).sum().backward();
      const auto name = fmt::format("{}, T {}", to_string(p), T);
      EXPECT_TRUE(torch::equal(packed, sliced)) << name;
      EXPECT_TRUE(torch::equal(packed_in.grad(), sliced_in.grad())) << name;
      if (p != Precision::kFp32) continue;
      auto ref_in = z.clone().requires_grad_(true);
      const auto r = ref_in.unbind(2);
      auto ref = reference(r[0], r[1], r[2], 0, 0.3);
      (ref * g).sum().backward();
      EXPECT_LT((packed - ref).abs().max().item<double>(), 1e-4) << name;
      EXPECT_LT((packed_in.grad() - ref_in.grad()).abs().max().item<double>(), 1e-4) << name;
    }
  }
}

// Under precision bf16 the kernel rounds q, k, v and the output gradient to bfloat16 once, and
// the weights P and their gradients dS per block, and accumulates in float32. Each value and
// gradient is then within a bound derived from bf16's 8-bit significand (u = 2^-8, a rounded
// product moves by at most (2u + u^2) of itself, a float32 sum of n terms by n 2^-24 of their
// magnitudes) of the float64 attention of the float32 inputs:
//   logits  |ds_ts| <= delta_ts = alpha (2u + u^2 + d 2^-24) sum_d |q_td| |k_sd|
//   weights |dP_ts| <= E_t P_ts,  E_t = exp(2 max_s delta_ts) - 1 (+ 2^-20 for float32's softmax)
//   y       |dy_t| <= sum_s (E_t (1 + 2u + u^2) + 2u + u^2 + 2 S 2^-24) P_ts |v_s|
//   gv      |dgv_s| <= sum_t (the same factor of row t) P_ts |g_t|
//   dP      |d(dP)_ts| <= eta_ts = (2u + u^2 + d 2^-24) sum_d |g_td| |v_sd|
//   c_t = sum_s P dP   |dc_t| <= gamma_t = sum_s (E_t P (|dP| + eta) + P eta) (1 + 2^-20)
//   dS = P (dP - c)    |d(dS)_ts| <= zeta_ts = E_t P (|dP - c| + eta + gamma) + P (eta + gamma)
//   gq, gk  alpha sum (zeta (1 + 2u + u^2) + (2u + u^2 + 2 n 2^-24) |dS|) |k| (or |q|)
// Where the forward keeps the weights as their bf16 bits (`kept_rounded`: the block products on
// the bf16 GEMM), the backward's P is the rounded one, whose relative error E_t (1 + 2u + u^2) +
// 2u + u^2 (y's factor) takes E_t's place in gamma and zeta.
// The largest error must also be a good part of its bound: otherwise float32 products ran.
void expect_bf16_attention_within_the_rounding_bound(bool kept_rounded) {
  const ScopedPrecision bf16(Precision::kBf16);
  const int64_t calls = fast_calls(FastKernel::kAttention),
                bf16_gemm = fast_calls(FastKernel::kBf16Gemm),
                as_float = fast_calls(FastKernel::kBf16AsFloat),
                sgemm = fast_calls(FastKernel::kSgemm);
  const double u = std::ldexp(1.0, -8), ulp = std::ldexp(1.0, -24), rnd = 2 * u + u * u;
  for (auto [T, N, alpha] : {std::tuple<int64_t, int64_t, double>{150, 3, 0.35}, {70, 0, 1.5}}) {
    const int64_t B = 2, H = 2, d = 16, S = N + T;
    torch::manual_seed(11);
    auto q = torch::randn({B, T, 3, H, d}).select(2, 1), k = torch::randn({B, S, H, d});
    auto v = torch::randn({B, S, H, d}), g = torch::randn({B, T, H, d});
    auto qi = q.detach().requires_grad_(true), ki = k.clone().requires_grad_(true),
         vi = v.clone().requires_grad_(true);
    auto y = causal_attention(qi, ki, vi, N, alpha);
    (y * g).sum().backward();
    // float64, heads first: (B, H, T, d) and (B, H, S, d)
    auto f64 = [](const torch::Tensor& x) { return x.to(torch::kFloat64).transpose(1, 2); };
    const auto q64 = f64(q), k64 = f64(k), v64 = f64(v), g64 = f64(g);
    const auto hidden = torch::ones({T, S}, torch::kBool).triu(N + 1);  // key s > N + t
    const auto P = torch::softmax(
        (alpha * torch::matmul(q64, k64.transpose(-1, -2))).masked_fill(hidden, -INFINITY), -1);
    const auto dP = torch::matmul(g64, v64.transpose(-1, -2));  // (B, H, T, S)
    const auto c = (P * dP).sum(-1, true);
    const auto dS = P * (dP - c);
    const auto exact_y = torch::matmul(P, v64), exact_gv = torch::matmul(P.transpose(-1, -2), g64),
               exact_gq = alpha * torch::matmul(dS, k64),
               exact_gk = alpha * torch::matmul(dS.transpose(-1, -2), q64);
    // the bounds
    const auto delta =
        (alpha * (rnd + d * ulp) * torch::matmul(q64.abs(), k64.abs().transpose(-1, -2)))
            .masked_fill(hidden, 0.0);
    const auto E = torch::exp(2 * std::get<0>(delta.max(-1, true))) - 1 + std::ldexp(1.0, -20);
    const auto row = E * (1 + rnd) + rnd + 2 * static_cast<double>(S) * ulp;  // (B, H, T, 1)
    const auto bound_y = torch::matmul(row * P, v64.abs());
    const auto bound_gv = torch::matmul((row * P).transpose(-1, -2), g64.abs());
    const auto eta = (rnd + d * ulp) * torch::matmul(g64.abs(), v64.abs().transpose(-1, -2));
    const auto Eb = kept_rounded ? row : E;  // P's relative error as the backward reads it
    const auto gamma =
        (Eb * P * (dP.abs() + eta) + P * eta).sum(-1, true) * (1 + std::ldexp(1.0, -20));
    const auto zeta = Eb * P * ((dP - c).abs() + eta + gamma) + P * (eta + gamma);
    auto term = [&](int64_t n) {
      return zeta * (1 + rnd) + (rnd + 2 * static_cast<double>(n) * ulp) * dS.abs();
    };
    const auto bound_gq = alpha * torch::matmul(term(S), k64.abs());
    const auto bound_gk = alpha * torch::matmul(term(T).transpose(-1, -2), q64.abs());
    const std::pair<torch::Tensor, std::array<torch::Tensor, 2>> parts[] = {
        {y, {exact_y, bound_y}},
        {qi.grad(), {exact_gq, bound_gq}},
        {ki.grad(), {exact_gk, bound_gk}},
        {vi.grad(), {exact_gv, bound_gv}}};
    const char* names[] = {"y", "gq", "gk", "gv"};
    for (int i = 0; i < 4; ++i) {
      const auto& [got, want] = parts[i];
      const auto err = (f64(got) - want[0]).abs(), ratio = err / want[1];
      EXPECT_TRUE((err <= want[1]).all().item<bool>())
          << names[i] << " at T " << T << ": worst error over the bound "
          << ratio.max().item<double>();
      EXPECT_GT(ratio.max().item<double>(), 0.02)
          << names[i] << " at T " << T << ": no bf16 rounding seen";
    }
  }
  // The block products run on the bf16 GEMM, or on the sgemm with their operands rounded to bf16
  // and widened (exact in float32) where AMX runs it: the errors above reaching a good part of the
  // bf16 bound show the rounding, and no product of float32 operands ran.
  EXPECT_EQ(fast_calls(FastKernel::kAttention) - calls, 2) << "the fused attention did not run";
  const int64_t on_bf16_gemm = fast_calls(FastKernel::kBf16Gemm) - bf16_gemm,
                on_sgemm = fast_calls(FastKernel::kBf16AsFloat) - as_float;
  EXPECT_GT(attention_blocks_on_bf16_gemm() ? on_bf16_gemm : on_sgemm, 0);
  EXPECT_EQ(attention_blocks_on_bf16_gemm() ? on_sgemm : on_bf16_gemm, 0);
  EXPECT_EQ(fast_calls(FastKernel::kSgemm) - sgemm, on_sgemm) << "a float32 product ran";
}

// Both ways of running the block products, whichever this CPU takes.
TEST(ModelCausalAttention, Bf16WithinTheRoundingBoundValuesAndGradients) {
  RECALL_BF16_OR_SKIP();
  for (bool on_bf16_gemm : {true, false}) {
    SCOPED_TRACE(on_bf16_gemm ? "block products on the bf16 GEMM" : "on the sgemm, bf16 values");
    const bool was = set_attention_blocks_on_bf16_gemm(on_bf16_gemm);
    expect_bf16_attention_within_the_rounding_bound(/*kept_rounded=*/on_bf16_gemm);
    set_attention_blocks_on_bf16_gemm(was);
  }
}

TEST(ModelCausalAttention, RejectsMismatchedShapes) {
  RECALL_FAST_GEMM_OR_SKIP();
  auto q = torch::randn({2, 4, 1, 8}), k = torch::randn({2, 6, 1, 8});
  EXPECT_THROW(causal_attention(q, k, k, 1, 1.0), std::invalid_argument);  // 6 != 1 + 4
  EXPECT_NO_THROW(causal_attention(q, k, k, 2, 1.0));
  // float64 is the reference's: the kernel refuses it rather than computing something else
  const auto q64 = q.to(torch::kFloat64), k64 = k.to(torch::kFloat64);
  EXPECT_FALSE(causal_attention_runs(q64, k64, k64));
  EXPECT_THROW(causal_attention(q64, k64, k64, 2, 1.0), std::invalid_argument);
}

}  // namespace
}  // namespace recall
