// LayerNorm over the last dimension, y = (x - mean) / sqrt(var + eps) * weight (+ bias), with the
// biased variance (as torch): a fused kernel (one vectorised pass per row each way, where torch's
// kernels make several) beside its reference, torch::layer_norm. And RMSNorm, y = x / rms(x) *
// weight, the same kernel with the mean taken as 0: the blocks' norm and Qwen3's norm of each
// head's query and key.
#pragma once
#include "recall/core/torch.h"

namespace recall {

// The default eps of both norms, as GPT-2's and torch's LayerNorm.
inline constexpr double kNormEps = 1e-5;

// x (..., D), weight (D,), bias (D,) or undefined -> (..., D). The fused kernel on float32 CPU
// tensors under the fast kernels (recall/ops/kernels.h), matching layer_norm_reference to float32
// rounding; layer_norm_reference anywhere else. Differentiable in x, weight and bias.
torch::Tensor fast_layer_norm(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& bias, double eps);

// torch::layer_norm: the fallback and the tests' reference.
torch::Tensor layer_norm_reference(const torch::Tensor& x, const torch::Tensor& weight,
                                   const torch::Tensor& bias, double eps);

// RMSNorm over the last dimension: x (..., D), weight (D,) -> x / sqrt(mean(x^2) + eps) * weight,
// (..., D), as transformers' LlamaRMSNorm computes it in float32. The fused kernel (LayerNorm's,
// with the mean taken as 0) on float32 CPU tensors under the fast kernels; rms_norm_reference
// anywhere else.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// RMSNorm in torch's ops, differentiated by autograd: the fallback and the tests' reference.
torch::Tensor rms_norm_reference(const torch::Tensor& x, const torch::Tensor& weight, double eps);

}  // namespace recall
