// The gated store (ffn = glu): f(x) = W2 (gate(W1 x) * W3 x), the gate an activation of its own
// weights W1: silu = SwiGLU, relu = ReGLU, relu2 = the squared-ReLU GLU, gelu = GeGLU. N hidden
// units are N memories: keys the gate rows of W1, values the columns of W2, weights
// w_i(x) = gate(k_i . x) (u_i . x) with u_i the rows of W3. Written with keys and values, W1 and
// W3 both take the keys: with the silu gate that is the weight-function store swiglu, s silu(s).
//   x (..., d_model) -> gate(W1 x) * W3 x (..., N) -> (..., d_out)
#pragma once
#include "recall/stores/activation.h"
#include "recall/stores/store.h"

namespace recall {

struct GluStoreOptions {
  GluStoreOptions(int64_t d_model, int64_t hidden) : d_model_(d_model), hidden_(hidden) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, hidden);     // N, >= 0 (0: empty, to be written)
  TORCH_ARG(int64_t, d_out) = 0;  // 0: d_model
  TORCH_ARG(Activation, gate) = Activation::kSilu;
  TORCH_ARG(bool, bias) = false;
};

class GluStoreImpl : public StoreModule<GluStoreImpl, WritableStore> {
 public:
  explicit GluStoreImpl(GluStoreOptions options);
  void reset() override;
  // Appends N = M hidden units: W1 and W3 rows keys (M, d_model), W2 columns values (M, d_out).
  void write(const torch::Tensor& keys, const torch::Tensor& values) override;
  torch::Tensor forward(const torch::Tensor& x) override;           // (..., d_out)
  torch::Tensor recall_weights(const torch::Tensor& x) override;    // gate(W1 x) * W3 x: (..., N)
  torch::Tensor keys() const override { return w1->weight; }        // (N, d_model), the gate rows
  torch::Tensor values() const override { return w2->weight.t(); }  // (N, d_out)
  int64_t size() const override { return w1->weight.size(0); }
  std::optional<FeedForwardOptions> feed_forward_options() const override;

  GluStoreOptions options;
  torch::nn::Linear w1{nullptr};  // d_model -> N, the gate
  torch::nn::Linear w2{nullptr};  // N -> d_out
  torch::nn::Linear w3{nullptr};  // d_model -> N, the gated input
};
TORCH_MODULE(GluStore);

}  // namespace recall
