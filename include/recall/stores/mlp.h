// The MLP store (ffn = mlp): f(x) = W2 sigma(W1 x + b1) + b2 with sigma relu, relu2, relu3 or gelu
// (activation.h). N hidden units are N memories: keys the rows of W1, values the columns of W2,
// weights w_i(x) = sigma(k_i . x + b1_i); written with keys and values (no bias) it is the
// weight-function store relu^p.
//   x (..., d_model) -> sigma(W1 x) (..., N) -> (..., d_out)
#pragma once
#include "recall/stores/activation.h"
#include "recall/stores/store.h"

namespace recall {

struct MlpStoreOptions {
  MlpStoreOptions(int64_t d_model, int64_t hidden) : d_model_(d_model), hidden_(hidden) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, hidden);     // N, >= 0 (0: empty, to be written)
  TORCH_ARG(int64_t, d_out) = 0;  // 0: d_model
  TORCH_ARG(Activation, activation) = Activation::kGelu;
  TORCH_ARG(bool, bias) = false;
};

class MlpStoreImpl : public StoreModule<MlpStoreImpl, WritableStore> {
 public:
  explicit MlpStoreImpl(MlpStoreOptions options);
  void reset() override;
  // Appends N = M hidden units: W1 rows keys (M, d_model), W2 columns values (M, d_out). No bias.
  void write(const torch::Tensor& keys, const torch::Tensor& values) override;
  // gelu with a bias runs fast_mlp_gelu (the two layers as one function, bias and activation
  // fused), else fast_linear.
  torch::Tensor forward(const torch::Tensor& x) override;           // (..., d_out)
  torch::Tensor recall_weights(const torch::Tensor& x) override;    // sigma(W1 x): (..., N)
  torch::Tensor keys() const override { return w1->weight; }        // (N, d_model)
  torch::Tensor values() const override { return w2->weight.t(); }  // (N, d_out)
  int64_t size() const override { return w1->weight.size(0); }
  std::optional<FeedForwardOptions> feed_forward_options() const override;

  MlpStoreOptions options;
  torch::nn::Linear w1{nullptr};  // d_model -> N
  torch::nn::Linear w2{nullptr};  // N -> d_out
};
TORCH_MODULE(MlpStore);

}  // namespace recall
