// Parameter initialisation shared by the model's modules (GPT-2 style): weights ~ N(0, 0.02^2),
// biases 0.
#pragma once
#include "recall/core/torch.h"

namespace recall {

constexpr double kInitStd = 0.02;

inline void init_linear(torch::nn::Linear& linear) {
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, kInitStd);
  if (linear->bias.defined()) linear->bias.zero_();
}

// in or out may be 0: an empty layer that a store's write() grows.
inline torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias) {
  // torch's own initialisation divides by fan_in, so an empty layer is built at size 1 and emptied
  torch::nn::Linear linear(
      torch::nn::LinearOptions(std::max<int64_t>(in, 1), std::max<int64_t>(out, 1)).bias(bias));
  if (in == 0 || out == 0) {
    torch::NoGradGuard no_grad;
    linear->weight.set_data(torch::empty({out, in}));
    if (bias) linear->bias.set_data(torch::empty({out}));
  }
  init_linear(linear);
  return linear;
}

}  // namespace recall
