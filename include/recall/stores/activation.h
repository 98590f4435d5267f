// The elementwise activations of the learned stores: the mlp's sigma and the glu's gate.
//   relu, relu2, relu3: max(0, s)^p (the weight functions relu^p of weight_function.h)
//   gelu: s Phi(s), the exact (erf) GELU;   silu: s sigmoid(s)
//   gelu_tanh: s (1 + tanh(sqrt(2/pi) (s + 0.044715 s^3))) / 2, GPT-2's GELU (gelu_new)
#pragma once
#include <string>
#include <vector>

#include "recall/core/torch.h"

namespace recall {

enum class Activation { kRelu, kRelu2, kRelu3, kGelu, kSilu, kGeluTanh };
std::string to_string(Activation v);
// Throws std::invalid_argument naming the value and the accepted names.
Activation activation_from_string(const std::string& s);
// Every activation, in enum order.
const std::vector<Activation>& all_activations();

// sigma(s), elementwise, in the dtype of s.
torch::Tensor activate(Activation a, const torch::Tensor& s);

}  // namespace recall
