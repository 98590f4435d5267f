// The feed-forward sublayer as a parametric memory store (SPEC section 5):
//   mlp        : W2 sigma(W1 x), sigma in relu, relu2, relu3 (the store's weight functions) or gelu
//   swiglu     : W2 (silu(W1 x) * W3 x), a gated GLU with its own gate weights
//   learned_kv : per head h, softmax(q_h K_h^T / sqrt(d_head)) V_h over ffn_slots learned key and
//                value vectors (persistent memory, Sukhbaatar et al. 2019), q = Wq x, then Wo
// (ffn = none has no sublayer; the block skips it.)
#pragma once
#include <torch/torch.h>

#include "recall/stores/weight_function.h"

namespace recall {

enum class FfnKind { kMlp, kSwiglu, kLearnedKv, kNone };
enum class Activation { kRelu, kRelu2, kRelu3, kGelu };
std::string to_string(FfnKind v);
std::string to_string(Activation v);
// Each throws std::invalid_argument naming the value and the accepted names.
FfnKind ffn_kind_from_string(const std::string& s);
Activation activation_from_string(const std::string& s);

struct FeedForwardOptions {
  explicit FeedForwardOptions(int64_t d_model) : d_model_(d_model) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(FfnKind, kind) = FfnKind::kMlp;
  TORCH_ARG(Activation, activation) = Activation::kGelu;
  TORCH_ARG(int64_t, mult) = 4;     // mlp, swiglu: hidden = mult * d_model
  TORCH_ARG(int64_t, slots) = 0;    // learned_kv
  TORCH_ARG(int64_t, n_heads) = 1;  // learned_kv
  TORCH_ARG(bool, bias) = false;
};

class FeedForwardImpl : public torch::nn::Cloneable<FeedForwardImpl> {
 public:
  explicit FeedForwardImpl(FeedForwardOptions options);
  void reset() override;
  // x: (..., d_model) -> (..., d_model)
  torch::Tensor forward(const torch::Tensor& x);
  // The mlp's activation sigma, elementwise.
  torch::Tensor activate(const torch::Tensor& s) const;

  FeedForwardOptions options;
  torch::nn::Linear w1{nullptr};  // mlp, swiglu: d_model -> hidden; learned_kv: the query Wq
  torch::nn::Linear w2{nullptr};  // mlp, swiglu: hidden -> d_model; learned_kv: the output Wo
  torch::nn::Linear w3{nullptr};  // swiglu: the gated input, d_model -> hidden
  torch::Tensor keys, values;     // learned_kv: (H, slots, d_head)
};
TORCH_MODULE(FeedForward);

}  // namespace recall
