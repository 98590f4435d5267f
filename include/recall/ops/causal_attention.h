// Causal softmax attention over N memory keys followed by T context keys:
//   y_t = sum_{s < N + t + 1} softmax_s(alpha q_t . k_s) v_s,   t = 0..T-1
// (memories are visible to every query; context key s - N only to queries t >= s - N).
// The fused path of the attention store (attention.h): float32 CPU tensors with oneDNN's sgemm
// present use a blocked kernel: blocks of 64 queries compute logits only against the keys their
// last row can see, so the masked upper triangle is mostly never computed; each (batch x head)
// item runs on one thread with its logits in cache. Under precision bf16 (recall/ops/precision.h)
// q, k, v and the output gradient are rounded to bfloat16 once per call, the weights (and their
// gradients) per block for their products; the softmax, its backward and every accumulation stay
// float32, as under autocast. The block products run on the bf16 GEMM, except where AMX runs it
// (attention_blocks_on_bf16_gemm): there the per-call set-up cost more than the small products, so
// their bf16 operands are widened to float32 (exactly) and multiplied by the sgemm, which gives
// what the bf16 GEMM gives up to the order of the float32 sums. On the bf16 GEMM the training
// forward keeps each block's weights for the backward as those bf16 bits (half the memory), so the
// softmax backward reads the rounded weights where autocast's reads float32 ones. Anything else
// runs the plain-torch reference beside it, causal_attention_reference, which the kernel's tests
// compare against, and which the attention store (recall/stores/attention.h) runs for its general
// logit scales, its activation cache and incremental decoding.
#pragma once
#include "recall/core/torch.h"

namespace recall {

// Whether causal_attention runs on these tensors: float32, non-empty, on the CPU with oneDNN's
// sgemm, and the fast kernels on (recall/ops/kernels.h).
bool causal_attention_runs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// Whether, under precision bf16, the block products run on the bf16 GEMM (counted as
// FastKernel::kBf16Gemm) on bfloat16 bits; false where the CPU has AMX, whose bf16 GEMM is slower
// than the sgemm on blocks this small: there the sgemm multiplies the bf16 values held as float32
// (FastKernel::kBf16AsFloat).
bool attention_blocks_on_bf16_gemm();
// For the tests of both paths on one CPU: sets the choice, returns the one before.
bool set_attention_blocks_on_bf16_gemm(bool on);

// q: (B, T, H, d), k and v: (B, N + T, H, d) -> (B, T, H, d), contiguous. Differentiable in q, k, v
// (first order). Needs causal_attention_runs(q, k, v).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, int64_t n_mem, double alpha);

// causal_attention(q, k, v, 0, alpha) on the three slices of one projection qkv (B, T, 3, H, d),
// q, k, v in that order, without memories. Differentiable in qkv, whose gradient comes back as one
// tensor: the slices' three gradients gathered by autograd would cost a copy of them all.
torch::Tensor causal_attention_packed(const torch::Tensor& qkv, double alpha);

// What causal_attention_reference returns: the per-head outputs and the weights that made them.
struct Attended {
  torch::Tensor y;        // (B, T, H, dh); undefined when the reference got no values
  torch::Tensor weights;  // (B, H, T, S), S = N + offset + T
};

// The attention maths in plain torch ops, the one reference. q (B, T, H, dh) holds the positions
// offset .. offset + T - 1; k and v (B, S, H, dh) the N = n_mem memories, then the context keys
// 0 .. offset + T - 1; scale (H|1, T) the logit multiplier of each head and query row. For query
// t (position p = offset + t)
//   w_ts = softmax_s(scale_t q_t . k_s)   over the memories and context s <= p,
//   y_t = sum_s w_ts v_s.
// Without v (undefined), the weights alone. causal_attention(q, k, v, N, alpha) is this with
// offset 0 and scale alpha everywhere.
Attended causal_attention_reference(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, const torch::Tensor& scale,
                                    int64_t n_mem, int64_t offset = 0);

}  // namespace recall
