// How sharp a trained model's attention is, and how much its logits still learn: the measurement of
// the sharpness experiment (recall/experiments/experiments.h).
#pragma once
#include "recall/core/torch.h"
#include "recall/models/transformer.h"
#include "recall/train/task.h"

namespace recall {

// The gradient of a loss with respect to the logits z of w = softmax(z) (last dimension), from its
// gradient g with respect to w: w (g - sum_s w_s g_s). Same shape as w.
torch::Tensor softmax_logit_grad(const torch::Tensor& w, const torch::Tensor& g);

// Attention statistics of `model` on `batch`, summed over layers and heads:
//   grad_norm: || dL / dz ||_2 over every attention logit z (after the scale, before the softmax;
//              L the mean cross-entropy over the batch's scored positions), from the gradient of
//              the weights w = softmax(z) through softmax_logit_grad;
//   entropy:   the mean over rows (layer, batch, head, query) of -sum_s w_s ln w_s, in nats;
//   uniform_entropy: the same for uniform weights over the keys each query sees.
struct AttentionStats {
  double grad_norm = 0, entropy = 0, uniform_entropy = 0;
};
AttentionStats attention_stats(Transformer& model, const Batch& batch);

}  // namespace recall
