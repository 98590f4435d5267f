// Matrix products for the model. On this project's CPUs the BLAS behind LibTorch's mm/bmm (OpenBLAS
// 0.3.21, which does not know recent Xeons and falls back to an AVX2 kernel) is several times
// slower than oneDNN's sgemm, which LibTorch already loads (libdnnl). For float32 CPU tensors these
// functions call dnnl_sgemm (looked up at run time; strided views are passed as transposes, not
// copied), or MKL's sgemm where the LibTorch brings MKL and hides oneDNN (PyPI's torch 2.x), and
// parallelise batches over torch's threads; anything else, and everything under
// RECALL_KERNELS=reference (recall/ops/kernels.h), falls back to torch::matmul.
#pragma once
#include "recall/core/torch.h"
#include "recall/ops/kernels.h"

namespace recall {

// Whether a fast sgemm (oneDNN's or MKL's) was found in the process, and which:
// "oneDNN dnnl_sgemm", "MKL sgemm", or "" for none.
bool fast_gemm_available();
std::string fast_gemm_name();

// The GEMM the trainer's matrix products run on `device`: "oneDNN dnnl_sgemm" or "MKL sgemm" when
// one was found (and RECALL_KERNELS is not reference), the bf16 GEMM and the CPU's bf16 units under
// precision bf16, else torch's matmul and its library, e.g. "torch::matmul (OpenBLAS SkylakeX)".
std::string gemm_backend(const c10::Device& device = c10::Device(c10::kCPU));

// Each product counts a call of FastKernel::kSgemm (or kBf16Gemm; recall/ops/kernels.h): a test
// of a fast path reads fast_calls before and after, to know the fast path is the one that ran.

// The bf16 GEMM beside the fast sgemm ("oneDNN dnnl_gemm_bf16bf16f32", "MKL
// cblas_gemm_bf16bf16f32", or "" for none). Under
// matmul_precision() bf16 (recall/ops/precision.h), fast_matmul, fast_linear and
// fast_linear_gelu, forward and backward, round both operands to bfloat16 and run it (float32
// accumulation and result); the fused attention rounds its operands alike and runs its small
// products on it, or on the sgemm where AMX runs it (recall/ops/causal_attention.h). Each operand
// is rounded once: the forward keeps the rounded copies for the backward (half the bytes of the
// float32 ones), and the backward rounds the incoming gradient once for both of its products.
std::string bf16_gemm_name();

// The fast sgemm (row-major C = alpha op(A) op(B) + beta C, trans 'N' or 'T'); returns its status,
// 0 on success. Requires fast_gemm_available(). Inside a torch parallel region it runs on one
// thread.
int fast_sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
               const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
               int64_t ldc);

// The bf16 GEMM (row-major, as fast_sgemm) on bfloat16 bit patterns, float32 accumulation and
// C; counts a call of FastKernel::kBf16Gemm and returns its status, 0 on success. Requires
// bf16_gemm_name() to be non-empty. Inside a torch parallel region it runs on one thread.
int fast_bf16_gemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                   const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta,
                   float* C, int64_t ldc);

// x (float32, on the CPU) rounded to bfloat16 as torch's x.to(kBFloat16) rounds (to nearest,
// ties to even; row_math::round_to_bf16), in parallel over rows: a new tensor of x's sizes,
// contiguous, or a transposed contiguous matrix when x is a transposed one (stride(-2) == 1), so
// a product reads it as x is read. A bfloat16 x is returned as it is. With `as` float32, the
// rounded values as float32 (row_math::bf16_value, exact), for an sgemm that multiplies bf16
// numbers: the attention's small products, where the bf16 GEMM is slower (causal_attention.h).
torch::Tensor round_to_bf16(const torch::Tensor& x, torch::ScalarType as = torch::kBFloat16);

// a (M, K) @ b (K, N) -> (M, N), or batched a (n, M, K) @ b (n, K, N) -> (n, M, N); times alpha.
// Differentiable in a and b (first order).
torch::Tensor fast_matmul(const torch::Tensor& a, const torch::Tensor& b, double alpha = 1.0);

// x (..., in) @ weight (out, in)^T + bias (out) -> (..., out); bias may be undefined.
torch::Tensor fast_linear(const torch::Tensor& x, const torch::Tensor& weight,
                          const torch::Tensor& bias = {});

// gelu(x (..., in) @ weight (out, in)^T + bias (out)) -> (..., out), the exact (erf) GELU, with
// the bias and activation fused into one pass each way (float32 CPU with oneDNN present; otherwise
// linear_gelu_reference). Matches the reference to about 1e-6 (erf to 1.5e-7). Differentiable.
torch::Tensor fast_linear_gelu(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias);

// The MLP gelu(x (..., in) @ w1 (N, in)^T + b1 (N)) @ w2 (out, N)^T + b2 (out) -> (..., out), b2
// optional: fast_linear_gelu then fast_linear as one differentiable function, the same bits under
// fp32; under bf16 the hidden layer is written only as the bf16 operand of the second product.
// Where those two would not take their fast paths, it runs them.
torch::Tensor fast_mlp_gelu(const torch::Tensor& x, const torch::Tensor& w1,
                            const torch::Tensor& b1, const torch::Tensor& w2,
                            const torch::Tensor& b2 = {});

// The same with torch ops: gelu(linear(x, weight, bias)).
torch::Tensor linear_gelu_reference(const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& bias);

}  // namespace recall
