#include "recall/stores/feed_forward.h"

#include <cmath>

#include "recall/core/enum_names.h"
#include "recall/core/error.h"
#include "recall/core/gemm.h"
#include "recall/stores/init.h"

namespace recall {

namespace {
constexpr std::array<const char*, 4> kFfnNames = {"mlp", "swiglu", "learned_kv", "none"};
constexpr std::array<const char*, 4> kActivationNames = {"relu", "relu2", "relu3", "gelu"};
}  // namespace

std::string to_string(FfnKind v) {
  return enum_name(kFfnNames, v);
}
std::string to_string(Activation v) {
  return enum_name(kActivationNames, v);
}
FfnKind ffn_kind_from_string(const std::string& s) {
  return enum_from_name<FfnKind>(kFfnNames, s, "ffn");
}
Activation activation_from_string(const std::string& s) {
  return enum_from_name<Activation>(kActivationNames, s, "activation");
}

FeedForwardImpl::FeedForwardImpl(FeedForwardOptions options_) : options(options_) {
  reset();
}

void FeedForwardImpl::reset() {
  const int64_t D = options.d_model();
  const bool bias = options.bias();
  check_arg(options.kind() != FfnKind::kNone, "ffn = none has no feed-forward module");
  if (options.kind() == FfnKind::kLearnedKv) {
    const int64_t H = options.n_heads(), S = options.slots();
    check_arg(S >= 1, fmt::format("ffn_slots = {}: must be >= 1 with ffn = learned_kv", S));
    check_arg(H >= 1 && D % H == 0,
              fmt::format("d_model = {} is not divisible by n_heads = {}", D, H));
    w1 = register_module("w1", make_linear(D, D, bias));
    w2 = register_module("w2", make_linear(D, D, bias));
    keys = register_parameter("keys", torch::randn({H, S, D / H}) / std::sqrt(D / H));
    values = register_parameter("values", torch::randn({H, S, D / H}) * kInitStd);
    return;
  }
  check_arg(options.mult() >= 1, fmt::format("ffn_mult = {}: must be >= 1", options.mult()));
  const int64_t hidden = options.mult() * D;
  w1 = register_module("w1", make_linear(D, hidden, bias));
  w2 = register_module("w2", make_linear(hidden, D, bias));
  if (options.kind() == FfnKind::kSwiglu) w3 = register_module("w3", make_linear(D, hidden, bias));
}

namespace {
torch::Tensor lin(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return fast_linear(x, layer->weight, layer->bias);
}
}  // namespace

torch::Tensor FeedForwardImpl::activate(const torch::Tensor& s) const {
  switch (options.activation()) {
    case Activation::kGelu:
      return torch::gelu(s);  // exact (erf) GELU
    case Activation::kRelu:
      return relu_pow(1)(s);
    case Activation::kRelu2:
      return relu_pow(2)(s);
    case Activation::kRelu3:
      return relu_pow(3)(s);
  }
  return s;
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  switch (options.kind()) {
    case FfnKind::kMlp:
      if (options.activation() == Activation::kGelu && w1->bias.defined())
        return lin(w2, fast_linear_gelu(x, w1->weight, w1->bias));  // one fused pass each way
      return lin(w2, activate(lin(w1, x)));
    case FfnKind::kSwiglu:
      return lin(w2, torch::silu(lin(w1, x)) * lin(w3, x));
    case FfnKind::kLearnedKv: {
      const int64_t H = options.n_heads(), dh = options.d_model() / H;
      auto lead = x.sizes().slice(0, x.dim() - 1).vec();         // the leading dims (...)
      auto q = lin(w1, x).reshape({-1, H, dh}).transpose(0, 1);  // (H, n, dh), n = prod(...)
      auto logits = fast_matmul(q, keys.transpose(1, 2), 1.0 / std::sqrt(static_cast<double>(dh)));
      auto y =
          fast_matmul(torch::softmax(logits, -1), values);  // (H, n, S) @ (H, S, dh) -> (H, n, dh)
      lead.push_back(options.d_model());
      return lin(w2, y.transpose(0, 1).reshape(lead));  // (..., d_model)
    }
    case FfnKind::kNone:
      break;
  }
  return x;
}

}  // namespace recall
