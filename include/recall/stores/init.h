// Parameter initialisation shared by the model's modules (GPT-2 style): weights ~ N(0, 0.02^2),
// biases 0.
#pragma once
#include <torch/torch.h>

namespace recall {

constexpr double kInitStd = 0.02;

inline void init_linear(torch::nn::Linear& linear) {
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, kInitStd);
  if (linear->bias.defined()) linear->bias.zero_();
}

inline torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias) {
  torch::nn::Linear linear(torch::nn::LinearOptions(in, out).bias(bias));
  init_linear(linear);
  return linear;
}

}  // namespace recall
