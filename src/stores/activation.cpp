#include "recall/stores/activation.h"

#include <array>

#include "recall/core/enum_names.h"
#include "recall/stores/weight_function.h"

namespace recall {

namespace {
constexpr std::array<const char*, 6> kActivationNames = {"relu", "relu2", "relu3",
                                                         "gelu", "silu",  "gelu_tanh"};
}  // namespace

std::string to_string(Activation v) {
  return enum_name(kActivationNames, v);
}
Activation activation_from_string(const std::string& s) {
  return enum_from_name<Activation>(kActivationNames, s, "activation");
}
const std::vector<Activation>& all_activations() {
  static const std::vector<Activation> all = enum_values<Activation>(kActivationNames);
  return all;
}

torch::Tensor activate(Activation a, const torch::Tensor& s) {
  switch (a) {
    case Activation::kRelu:
      return relu_pow(1)(s);
    case Activation::kRelu2:
      return relu_pow(2)(s);
    case Activation::kRelu3:
      return relu_pow(3)(s);
    case Activation::kGelu:
      return torch::gelu(s);  // exact (erf) GELU
    case Activation::kSilu:
      return torch::silu(s);
    case Activation::kGeluTanh:
      return torch::gelu(s, "tanh");
  }
  return s;
}

}  // namespace recall
