// Causal softmax attention over N memory keys followed by T context keys:
//   y_t = sum_{s < N + t + 1} softmax_s(alpha q_t . k_s) v_s,   t = 0..T-1
// (memories are visible to every query; context key s - N only to queries t >= s - N).
// Float32 CPU tensors with oneDNN's sgemm present use a blocked kernel: blocks of 64 queries
// compute logits only against the keys their last row can see, so the masked upper triangle is
// mostly never computed; each (batch x head) item runs on one thread with its logits in cache.
// Anything else runs the same maths with torch ops (additive -inf mask, softmax, products).
#pragma once
#include <torch/torch.h>

namespace recall {

// q: (B, T, H, d), k and v: (B, N + T, H, d) -> (B, T, H, d), contiguous. Differentiable in q, k, v
// (first order).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, int64_t n_mem, double alpha);

// The torch-ops form, used as the fallback and as the kernel's reference in tests.
torch::Tensor causal_attention_reference(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, int64_t n_mem, double alpha);

}  // namespace recall
