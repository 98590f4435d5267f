// Causal softmax attention over N memory keys followed by T context keys:
//   y_t = sum_{s < N + t + 1} softmax_s(alpha q_t . k_s) v_s,   t = 0..T-1
// (memories are visible to every query; context key s - N only to queries t >= s - N).
// The fused path of the attention store (attention.h): float32 CPU tensors with oneDNN's sgemm
// present use a blocked kernel: blocks of 64 queries compute logits only against the keys their
// last row can see, so the masked upper triangle is mostly never computed; each (batch x head)
// item runs on one thread with its logits in cache. Under precision bf16 (recall/core/precision.h)
// q, k, v and the output gradient are rounded to bfloat16 once per call and every product runs on
// the bf16 GEMM, the weights (and their gradients) rounded per block for theirs; the softmax, its
// backward and every accumulation stay float32, as under autocast. Anything else runs the store's
// plain-torch reference, AttentionImpl::attend_reference, which the kernel's tests compare against.
#pragma once
#include "recall/core/torch.h"

namespace recall {

// Whether causal_attention runs on these tensors: float32, non-empty, on the CPU with oneDNN's
// sgemm, and the fast kernels on (core/kernels.h).
bool causal_attention_runs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// q: (B, T, H, d), k and v: (B, N + T, H, d) -> (B, T, H, d), contiguous. Differentiable in q, k, v
// (first order). Needs causal_attention_runs(q, k, v).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, int64_t n_mem, double alpha);

}  // namespace recall
