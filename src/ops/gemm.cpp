#include "recall/ops/gemm.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>

#include "recall/ops/blas.h"
#include "recall/ops/column_sums.h"
#include "recall/ops/kernels.h"
#include "recall/ops/precision.h"
#include "recall/ops/row_math.h"

namespace recall {

namespace {

// oneDNN's C API (row-major): C = alpha op(A) op(B) + beta C; returns 0 (dnnl_success) on success.
using SgemmFn = int (*)(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                        float* C, int64_t ldc);
// The Fortran BLAS sgemm (column-major, 32-bit sizes, every argument by pointer).
using FortranSgemmFn = void (*)(const char* transa, const char* transb, const int* m, const int* n,
                                const int* k, const float* alpha, const float* a, const int* lda,
                                const float* b, const int* ldb, const float* beta, float* c,
                                const int* ldc);

// MKL's sgemm, where MKL is in the process: PyPI's torch links MKL statically and exports its
// BLAS, but not oneDNN's API. MKL is told apart from another BLAS's sgemm_ (Debian's torch loads
// OpenBLAS, whose sgemm_ is slower on recent Xeons) by MKL_Set_Dynamic, which it needs anyway:
// MKL may split a product over fewer threads when the machine is busy, and so sum it in another
// order; MKL_Set_Dynamic(0) keeps the split fixed, so runs give the same bits. MKL's C entry
// points are the mixed-case names (the lower-case ones take pointers, as Fortran's).
FortranSgemmFn mkl_sgemm() {
  static const FortranSgemmFn fn = [] {
    const auto set_dynamic =
        reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "MKL_Set_Dynamic"));
    if (!set_dynamic) return FortranSgemmFn{};
    set_dynamic(0);
    return reinterpret_cast<FortranSgemmFn>(dlsym(RTLD_DEFAULT, "sgemm_"));
  }();
  return fn;
}

// Whether every size fits MKL's 32-bit int arguments.
bool fit_int(std::initializer_list<int64_t> sizes) {
  return std::max(sizes) <= std::numeric_limits<int>::max();
}

// Row-major C (M, N) = op(A) op(B) is column-major C^T (N, M) = op(B)^T op(A)^T, and a row-major
// matrix read column-major is its transpose: the same call with A and B (and M and N) swapped.
int mkl_row_major_sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                        float* C, int64_t ldc) {
  if (!fit_int({M, N, K, lda, ldb, ldc})) return 2;  // dnnl_invalid_arguments
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K),
            la = static_cast<int>(lda), lb = static_cast<int>(ldb), lc = static_cast<int>(ldc);
  mkl_sgemm()(&transb, &transa, &n, &m, &k, &alpha, B, &lb, A, &la, &beta, C, &lc);
  return 0;
}

// The process's row-major sgemm: oneDNN's (Debian's LibTorch loads libdnnl), else MKL's.
SgemmFn sgemm_fn() {
  static const SgemmFn fn = [] {
    if (auto dnnl = reinterpret_cast<SgemmFn>(dlsym(RTLD_DEFAULT, "dnnl_sgemm"))) return dnnl;
    return mkl_sgemm() ? &mkl_row_major_sgemm : SgemmFn{nullptr};
  }();
  return fn;
}

// bf16 GEMMs: C (float32) = alpha op(A) op(B) + beta C over bfloat16 A and B (uint16 bit
// patterns), float32 accumulation. oneDNN's has dnnl_sgemm's row-major arguments; MKL's is CBLAS.
using Bf16GemmFn = int (*)(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                           const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                           float beta, float* C, int64_t ldc);
using CblasBf16Fn = void (*)(int layout, int transa, int transb, int m, int n, int k, float alpha,
                             const uint16_t* A, int lda, const uint16_t* B, int ldb, float beta,
                             float* C, int ldc);

CblasBf16Fn mkl_bf16() {
  static const auto fn =
      mkl_sgemm() ? reinterpret_cast<CblasBf16Fn>(dlsym(RTLD_DEFAULT, "cblas_gemm_bf16bf16f32"))
                  : CblasBf16Fn{nullptr};
  return fn;
}

int mkl_row_major_bf16(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                       const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta,
                       float* C, int64_t ldc) {
  if (!fit_int({M, N, K, lda, ldb, ldc})) return 2;             // dnnl_invalid_arguments
  constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;  // CBLAS's enums
  mkl_bf16()(kRowMajor, transa == 'T' ? kTrans : kNoTrans, transb == 'T' ? kTrans : kNoTrans,
             static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A,
             static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
  return 0;
}

// The process's bf16 GEMM beside its sgemm: oneDNN's where dnnl_sgemm is oneDNN's, else MKL's.
Bf16GemmFn bf16_fn() {
  static const Bf16GemmFn fn = [] {
    if (dlsym(RTLD_DEFAULT, "dnnl_sgemm"))
      return reinterpret_cast<Bf16GemmFn>(dlsym(RTLD_DEFAULT, "dnnl_gemm_bf16bf16f32"));
    return mkl_bf16() ? &mkl_row_major_bf16 : Bf16GemmFn{nullptr};
  }();
  return fn;
}

// A matrix operand of a (possibly batched) float tensor: the last two dims are rows x cols, stored
// row-major ('N', leading dimension ld) or column-major ('T').
struct Operand {
  torch::Tensor t;  // keeps a copy alive when one was needed
  char trans = 'N';
  int64_t ld = 1;
};

Operand operand(const torch::Tensor& x) {
  const int64_t rows = x.size(-2), cols = x.size(-1), s0 = x.stride(-2), s1 = x.stride(-1);
  if (s1 == 1 && s0 >= std::max<int64_t>(1, cols)) return {x, 'N', s0};
  if (s0 == 1 && s1 >= std::max<int64_t>(1, rows)) return {x, 'T', s1};
  auto c = x.contiguous();
  return {c, 'N', std::max<int64_t>(1, cols)};
}

// False under RECALL_KERNELS=reference: every caller then runs torch's own ops.
bool use_fast(const torch::Tensor& a, const torch::Tensor& b) {
  return sgemm_fn() && fast_kernels(a.device()) && b.device().is_cpu() &&
         a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32 &&
         a.dim() == b.dim() && (a.dim() == 2 || (a.dim() == 3 && a.size(0) == b.size(0))) &&
         a.size(-1) == b.size(-2);
}

// gemm(i) for each of n products: a single product is threaded by the GEMM itself, a batch runs
// one product per thread.
template <typename Gemm>
void for_each_product(int64_t n, const Gemm& gemm) {
  if (n == 1) {
    gemm(0);
    return;
  }
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) gemm(i);
  });
}

// `x` as the products take it: rounded to bfloat16 under precision bf16 (round_to_bf16, once per
// operand: the autograd functions below keep what they rounded for their backward), itself
// otherwise.
torch::Tensor product_operand(const torch::Tensor& x) {
  return matmul_precision() == Precision::kBf16 ? round_to_bf16(x) : x;
}

// The product without autograd: alpha a b, plus the row `bias` (N,) when given (2-D only). a and b
// are float32, or bfloat16 as product_operand gives them under bf16; the caller checked use_fast
// on the float32 inputs they came from. `sizes` (2-D only): the (M, N) result allocated with these
// sizes instead, (..., N), so that a caller's output is not a view of it.
torch::Tensor raw_matmul(const torch::Tensor& a, const torch::Tensor& b, double alpha,
                         const torch::Tensor& bias = {}, c10::IntArrayRef sizes = {}) {
  RECORD_USER_SCOPE("recall::gemm");  // a part of the step's profile (recall/core/step_profile.h)
  const bool batched = a.dim() == 3;
  const int64_t n = batched ? a.size(0) : 1, M = a.size(-2), K = a.size(-1), N = b.size(-1);
  auto c = torch::empty(batched         ? std::vector<int64_t>{n, M, N}
                        : sizes.empty() ? std::vector<int64_t>{M, N}
                                        : sizes.vec(),
                        a.options().dtype(torch::kFloat32));
  TORCH_INTERNAL_ASSERT(c.numel() == n * M * N, "raw_matmul: sizes ", sizes, " do not hold ", M,
                        " x ", N);
  if (c.numel() == 0) return c;
  // The bias is added after the product, in a pass over its output while that is still in cache:
  // writing the bias rows into the fresh (cold) output first, for the product to add onto (beta
  // 1), made bench-gpt's biased products 10 to 14 % slower a call (bf16 and fp32).
  const auto add_bias = [&] {
    if (!bias.defined()) return;
    RECORD_USER_SCOPE("recall::bias_add");  // elementwise, not the product's time
    const auto b = bias.contiguous();
    const float* pb = b.data_ptr<float>();
    float* rows = c.data_ptr<float>();
    at::parallel_for(
        0, M, std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1)),
        [&](int64_t r0, int64_t r1) { row_math::add_bias_rows(rows + r0 * N, pb, r1 - r0, N); });
  };
  if (K == 0) {
    c.zero_();
    add_bias();
    return c;
  }
  float* pc = c.data_ptr<float>();
  if (matmul_precision() == Precision::kBf16) {
    // bf16 asked for: never a silent fp32 product (the commands refuse bf16 up front where it
    // cannot run, check_precision)
    TORCH_CHECK(bf16_fn(), "precision bf16: this LibTorch has no bf16 GEMM; ",
                bf16_kernel_report());
    // Rounded once (their strides kept, so a transposed weight is read as one); the product
    // accumulates in float32 onto c.
    const Operand A = operand(round_to_bf16(a)), B = operand(round_to_bf16(b));
    const int64_t sa = batched ? A.t.stride(0) : 0, sb = batched ? B.t.stride(0) : 0;
    const auto* pa = reinterpret_cast<const uint16_t*>(A.t.data_ptr<at::BFloat16>());
    const auto* pb = reinterpret_cast<const uint16_t*>(B.t.data_ptr<at::BFloat16>());
    for_each_product(n, [&](int64_t i) {
      const int status =
          fast_bf16_gemm(A.trans, B.trans, M, N, K, static_cast<float>(alpha), pa + i * sa, A.ld,
                         pb + i * sb, B.ld, 0.0f, pc + i * M * N, N);
      TORCH_CHECK(status == 0, bf16_gemm_name(), " failed with status ", status);
    });
    add_bias();
    return c;
  }
  const Operand A = operand(a), B = operand(b);
  const int64_t sa = batched ? A.t.stride(0) : 0, sb = batched ? B.t.stride(0) : 0;
  const float* pa = A.t.data_ptr<float>();
  const float* pb = B.t.data_ptr<float>();
  for_each_product(n, [&](int64_t i) {
    const int status = fast_sgemm(A.trans, B.trans, M, N, K, static_cast<float>(alpha), pa + i * sa,
                                  A.ld, pb + i * sb, B.ld, 0.0f, pc + i * M * N, N);
    TORCH_CHECK(status == 0, fast_gemm_name(), " failed with status ", status);
  });
  add_bias();
  return c;
}

// The incoming gradient g (n, out) of a product's output as the backward's products take it
// (product_operand) and, with `bias`, its column sums, the bias gradient (else undefined). Under
// bf16 one read of g gives both (row_math::round_to_bf16_summing), where a rounding pass and
// torch's sum each read all of it; in fp32 the sums are the only pass (add_column_sums: 1.5 to 1.7
// ms of a bench-gpt step's thread time, where torch's sum over dim 0 took 3.1 to 3.3).
std::pair<torch::Tensor, torch::Tensor> output_gradient(const torch::Tensor& g, bool bias) {
  if (!bias) return {product_operand(g), torch::Tensor()};
  if (!g.is_contiguous()) return {product_operand(g), g.sum(0)};  // (out,)
  const int64_t n = g.size(0), w = g.size(1);
  if (matmul_precision() != Precision::kBf16) {  // g is the operand itself: only its sums
    RECORD_USER_SCOPE("recall::bias_sums");
    auto gb = column_sums(n, w, 1, g.options(), [&](int64_t begin, int64_t end, float* sums) {
      row_math::add_column_sums(g.data_ptr<float>() + begin * w, sums, end - begin, w);
    });
    return {g, gb[0]};
  }
  RECORD_USER_SCOPE("recall::round_bf16");
  auto gp = torch::empty_like(g, g.options().dtype(torch::kBFloat16));
  auto* out = reinterpret_cast<uint16_t*>(gp.data_ptr<at::BFloat16>());
  auto gb = column_sums(n, w, 1, g.options(), [&](int64_t begin, int64_t end, float* sums) {
    row_math::round_to_bf16_summing(g.data_ptr<float>() + begin * w, out + begin * w, sums,
                                    end - begin, w);
  });
  return {gp, gb[0]};
}

// The pass after the first product of a GELU layer, on its output s (n, w) without the bias: y =
// gelu(s + bias), as float32, or with `bits` as the bf16 bits of those values (the operand of the
// bf16 product after it, whose float32 copy is then never written); s is replaced in place by
// gelu'(s + bias), the derivative the backward multiplies by.
torch::Tensor bias_gelu(torch::Tensor& s, const torch::Tensor& bias, bool bits) {
  RECORD_USER_SCOPE("recall::bias_gelu");
  const auto b = bias.contiguous();
  auto y = torch::empty_like(s, bits ? s.options().dtype(torch::kBFloat16) : s.options());
  const int64_t n = s.size(0), w = s.size(1);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(w, 1));
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
    float* ps = s.data_ptr<float>() + begin * w;
    if (bits)
      row_math::bias_gelu_rows(ps, b.data_ptr<float>(), ps,
                               reinterpret_cast<uint16_t*>(y.data_ptr<at::BFloat16>()) + begin * w,
                               end - begin, w);
    else
      row_math::bias_gelu_rows(ps, b.data_ptr<float>(), ps, y.data_ptr<float>() + begin * w,
                               end - begin, w);
  });
  return y;
}

// The GELU layer's backward pass from the gradient g of its output and the derivative d that
// bias_gelu left: gs = g d, as the products after it take it (under bf16 written as their bf16
// operand, which would otherwise be rounded in a pass of its own), and its column sums, the bias
// gradient, in the same pass.
std::pair<torch::Tensor, torch::Tensor> bias_gelu_backward(const torch::Tensor& g_in,
                                                           const torch::Tensor& d) {
  RECORD_USER_SCOPE("recall::gelu_backward");
  const auto g = g_in.contiguous();  // (n, w)
  const int64_t n = d.size(0), w = d.size(1);
  const bool bf16 = matmul_precision() == Precision::kBf16;
  auto gs = torch::empty_like(d, bf16 ? d.options().dtype(torch::kBFloat16) : d.options());
  auto gb = column_sums(n, w, 1, d.options(), [&](int64_t begin, int64_t end, float* sums) {
    const float *gc = g.data_ptr<float>() + begin * w, *dc = d.data_ptr<float>() + begin * w;
    if (bf16)
      row_math::gelu_backward_rows(
          gc, dc, reinterpret_cast<uint16_t*>(gs.data_ptr<at::BFloat16>()) + begin * w, sums,
          end - begin, w);
    else
      row_math::gelu_backward_rows(gc, dc, gs.data_ptr<float>() + begin * w, sums, end - begin, w);
  });
  return {gs, gb[0]};
}

struct MatMulFunction : public torch::autograd::Function<MatMulFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a_in,
                               const torch::Tensor& b_in, double alpha) {
    const auto a = product_operand(a_in), b = product_operand(b_in);
    ctx->save_for_backward({a, b});
    ctx->saved_data["alpha"] = alpha;
    return raw_matmul(a, b, alpha);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& a = saved[0];
    const auto& b = saved[1];
    const double alpha = ctx->saved_data["alpha"].toDouble();
    const auto g = product_operand(grads[0]);
    torch::Tensor ga, gb;
    if (ctx->needs_input_grad(0)) ga = raw_matmul(g, b.transpose(-1, -2), alpha);  // g b^T
    if (ctx->needs_input_grad(1)) gb = raw_matmul(a.transpose(-1, -2), g, alpha);  // a^T g
    return {ga, gb, torch::Tensor()};
  }
};

// y = x W^T + b for 2-D x (n, in), W (out, in), b (out,) or empty (0,) for none (autograd functions
// take no undefined inputs). y is allocated with `sizes` (..., out), not made a view of the (n,
// out) product, since a view made inside an autograd function cannot be added to in place (the
// blocks' residual adds). The weight gradient comes out as (out, in) directly, not as the transpose
// of a (in, out) product.
struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& weight_in, const torch::Tensor& bias,
                               const std::vector<int64_t>& sizes) {
    const auto x = product_operand(x_in), weight = product_operand(weight_in);
    ctx->save_for_backward({x, weight});
    ctx->saved_data["bias"] = bias.numel() > 0;
    return raw_matmul(x, weight.t(), 1.0, bias.numel() > 0 ? bias : torch::Tensor(), sizes);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& weight = saved[1];
    const auto [gp, gb] =
        output_gradient(grads[0].reshape({-1, weight.size(0)}),
                        ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2));  // (n, out)
    torch::Tensor gx, gw;
    if (ctx->needs_input_grad(0)) gx = raw_matmul(gp, weight, 1.0);  // (n, out) @ (out, in)
    if (ctx->needs_input_grad(1)) gw = raw_matmul(gp.t(), x, 1.0);   // (out, n) @ (n, in)
    return {gx, gw, gb, torch::Tensor()};
  }
};

// y = gelu(x W^T + b) for 2-D x (n, in), W (out, in), b (out,): the product, then one pass adding
// the bias and applying the exact GELU, keeping its derivative d for the backward, whose one pass
// gives gs = g d and the bias gradient together.
struct LinearGeluFunction : public torch::autograd::Function<LinearGeluFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& weight_in, const torch::Tensor& bias) {
    const auto x = product_operand(x_in), weight = product_operand(weight_in);
    auto d = raw_matmul(x, weight.t(), 1.0);  // (n, out), gelu' of it plus the bias below
    auto y = bias_gelu(d, bias, /*bits=*/false);
    ctx->save_for_backward({x, weight, d});
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1], &d = saved[2];
    const auto [gp, gb] = bias_gelu_backward(grads[0], d);
    torch::Tensor gx, gw;
    if (ctx->needs_input_grad(0)) gx = raw_matmul(gp, weight, 1.0);  // (n, out) @ (out, in)
    if (ctx->needs_input_grad(1)) gw = raw_matmul(gp.t(), x, 1.0);   // (out, n) @ (n, in)
    return {gx, gw, gb};
  }
};

// f(x) = gelu(x W1^T + b1) W2^T + b2 for 2-D x (n, in), W1 (N, in), b1 (N,), W2 (out, N), b2
// (out,) or empty (0,): LinearGeluFunction and LinearFunction as one function, so that under bf16
// the hidden layer h (n, N) exists only as the bf16 operand of the second product, written by the
// GELU pass, where the two functions wrote it as float32 and rounded it in a pass of their own.
// Under fp32 the same steps as the two, the same bits. Its output has `sizes` (..., out), as
// LinearFunction's.
struct MlpGeluFunction : public torch::autograd::Function<MlpGeluFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& w1_in, const torch::Tensor& b1,
                               const torch::Tensor& w2_in, const torch::Tensor& b2,
                               const std::vector<int64_t>& sizes) {
    const auto x = product_operand(x_in), w1 = product_operand(w1_in), w2 = product_operand(w2_in);
    auto d = raw_matmul(x, w1.t(), 1.0);  // (n, N), gelu' of it plus b1 below
    const auto h = bias_gelu(d, b1, /*bits=*/matmul_precision() == Precision::kBf16);
    ctx->save_for_backward({x, w1, w2, d, h});
    ctx->saved_data["bias"] = b2.numel() > 0;
    return raw_matmul(h, w2.t(), 1.0, b2.numel() > 0 ? b2 : torch::Tensor(), sizes);  // (..., out)
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w1 = saved[1], &w2 = saved[2], &d = saved[3], &h = saved[4];
    const auto [gp, gb2] =
        output_gradient(grads[0].reshape({-1, w2.size(0)}),
                        ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(4));  // (n, out)
    torch::Tensor gw2, gx, gw1, gb1;
    if (ctx->needs_input_grad(3)) gw2 = raw_matmul(gp.t(), h, 1.0);  // (out, n) @ (n, N)
    if (ctx->needs_input_grad(0) || ctx->needs_input_grad(1) || ctx->needs_input_grad(2)) {
      const auto [gs, gb] =
          bias_gelu_backward(raw_matmul(gp, w2, 1.0), d);  // from (n, out) @ (out, N)
      gb1 = gb;
      if (ctx->needs_input_grad(0)) gx = raw_matmul(gs, w1, 1.0);      // (n, N) @ (N, in)
      if (ctx->needs_input_grad(1)) gw1 = raw_matmul(gs.t(), x, 1.0);  // (N, n) @ (n, in)
    }
    return {gx, gw1, gb1, gw2, gb2, torch::Tensor()};
  }
};

}  // namespace

std::string gemm_backend(const c10::Device& device) {
  const bool bf16 = matmul_precision() == Precision::kBf16;
  if (fast_gemm_available() && fast_kernels(device) && device.is_cpu())
    return bf16 && !bf16_gemm_name().empty() ? bf16_gemm_name() + " on " + cpu_bf16_units()
                                             : fast_gemm_name();
  const std::string autocast = bf16 ? " under bf16 autocast" : "";
  if (device.is_cpu()) return fmt::format("torch::matmul ({}){}", torch_blas_name(), autocast);
  return fmt::format("torch::matmul ({}){}", device.str(), autocast);
}

bool fast_gemm_available() {
  return sgemm_fn() != nullptr;
}

std::string fast_gemm_name() {
  if (!sgemm_fn()) return "";
  return sgemm_fn() == &mkl_row_major_sgemm ? "MKL sgemm" : "oneDNN dnnl_sgemm";
}

std::string bf16_gemm_name() {
  if (!bf16_fn()) return "";
  return bf16_fn() == &mkl_row_major_bf16 ? "MKL cblas_gemm_bf16bf16f32"
                                          : "oneDNN dnnl_gemm_bf16bf16f32";
}

int fast_sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
               const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
               int64_t ldc) {
  count_fast_call(FastKernel::kSgemm);
  return sgemm_fn()(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

int fast_bf16_gemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                   const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta,
                   float* C, int64_t ldc) {
  count_fast_call(FastKernel::kBf16Gemm);
  return bf16_fn()(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

torch::Tensor round_to_bf16(const torch::Tensor& x, torch::ScalarType as) {
  TORCH_CHECK(as == torch::kBFloat16 || as == torch::kFloat32,
              "round_to_bf16: gives bfloat16 or float32, not ", as);
  if (x.scalar_type() == torch::kBFloat16 && as == torch::kBFloat16) return x;
  RECORD_USER_SCOPE("recall::round_bf16");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.device().is_cpu(),
              "round_to_bf16: expected a float32 CPU tensor, got ", x.scalar_type(), " on ",
              x.device());
  if (x.dim() >= 2 && x.stride(-2) == 1 && x.stride(-1) != 1)  // a transposed matrix stays one
    return round_to_bf16(x.transpose(-1, -2), as).transpose(-1, -2);
  auto y = torch::empty(x.sizes(), x.options().dtype(as));
  if (x.numel() == 0) return y;
  const auto xs = x.stride(-1) == 1 ? x : x.contiguous();
  const int64_t w = x.size(-1), rows = x.numel() / w;
  // Row i's first float: its index over the leading dimensions, read through x's strides (a view
  // of rows 3 d_model apart, as the attention's q, k and v are, is rounded without a copy).
  const auto sizes = xs.sizes(), strides = xs.strides();
  const float* base = xs.data_ptr<float>();
  auto row = [&](int64_t i) {
    int64_t offset = 0;
    for (int64_t d = xs.dim() - 2; d >= 0; --d) {
      offset += (i % sizes[d]) * strides[d];
      i /= sizes[d];
    }
    return base + offset;
  };
  auto rows_into = [&](auto* out) {
    if (xs.is_contiguous()) {  // one run of floats: chunks of it, without the rows' index math
      at::parallel_for(0, xs.numel(), 32768, [&](int64_t begin, int64_t end) {
        row_math::round_to_bf16(base + begin, out + begin, end - begin);
      });
      return;
    }
    const int64_t grain = std::max<int64_t>(1, 32768 / w);
    at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) row_math::round_to_bf16(row(i), out + i * w, w);
    });
  };
  if (as == torch::kFloat32)
    rows_into(y.data_ptr<float>());
  else
    rows_into(reinterpret_cast<uint16_t*>(y.data_ptr<at::BFloat16>()));
  return y;
}

torch::Tensor fast_matmul(const torch::Tensor& a, const torch::Tensor& b, double alpha) {
  if (!use_fast(a, b)) {
    auto c = torch::matmul(a, b);
    return alpha == 1.0 ? c : c * alpha;
  }
  return MatMulFunction::apply(a, b, alpha);
}

torch::Tensor fast_linear(const torch::Tensor& x, const torch::Tensor& weight,
                          const torch::Tensor& bias) {
  auto out_sizes = x.sizes().vec();
  out_sizes.back() = weight.size(0);
  auto x2 = x.reshape({-1, x.size(-1)});  // (n, in)
  if (!use_fast(x2, weight.t()) || (bias.defined() && bias.scalar_type() != torch::kFloat32)) {
    auto y = torch::matmul(x2, weight.t());
    return (bias.defined() ? y + bias : y).view(out_sizes);
  }
  auto b = bias.defined() ? bias : torch::empty({0}, weight.options());
  return LinearFunction::apply(x2, weight, b, out_sizes);  // (..., out)
}

torch::Tensor fast_linear_gelu(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias) {
  auto x2 = x.reshape({-1, x.size(-1)});  // (n, in)
  if (!use_fast(x2, weight.t()) || bias.scalar_type() != torch::kFloat32 || bias.dim() != 1 ||
      bias.size(0) != weight.size(0))
    return linear_gelu_reference(x, weight, bias);
  auto out_sizes = x.sizes().vec();
  out_sizes.back() = weight.size(0);
  return LinearGeluFunction::apply(x2, weight, bias).view(out_sizes);  // (..., out)
}

torch::Tensor fast_mlp_gelu(const torch::Tensor& x, const torch::Tensor& w1,
                            const torch::Tensor& b1, const torch::Tensor& w2,
                            const torch::Tensor& b2) {
  auto x2 = x.reshape({-1, x.size(-1)});  // (n, in)
  const bool fits = b1.scalar_type() == torch::kFloat32 && b1.dim() == 1 &&
                    b1.size(0) == w1.size(0) && w2.scalar_type() == torch::kFloat32 &&
                    w2.device().is_cpu() && w2.dim() == 2 && w2.size(1) == w1.size(0) &&
                    (!b2.defined() || b2.scalar_type() == torch::kFloat32);
  if (!fits || !use_fast(x2, w1.t())) return fast_linear(fast_linear_gelu(x, w1, b1), w2, b2);
  auto out_sizes = x.sizes().vec();
  out_sizes.back() = w2.size(0);
  const auto b = b2.defined() ? b2 : torch::empty({0}, w2.options());
  return MlpGeluFunction::apply(x2, w1, b1, w2, b, out_sizes);  // (..., out)
}

torch::Tensor linear_gelu_reference(const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& bias) {
  return torch::gelu(torch::nn::functional::linear(x, weight, bias));  // exact (erf) GELU
}

}  // namespace recall
