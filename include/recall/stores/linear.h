// The linear store (ffn = linear): f(x) = W2 W1 x, no nonlinearity. N hidden units are N memories
// with keys the rows of W1 and values the columns of W2, recalled with weights w(x) = W1 x, so
// written with keys and values it is the outer-product store V^T K x.
//   x (..., d_model) -> W1 x (..., N) -> (..., d_out)
#pragma once
#include "recall/stores/store.h"

namespace recall {

struct LinearStoreOptions {
  LinearStoreOptions(int64_t d_model, int64_t hidden) : d_model_(d_model), hidden_(hidden) {}
  TORCH_ARG(int64_t, d_model);    // input (key) dimension
  TORCH_ARG(int64_t, hidden);     // N, >= 0 (0: empty, to be written)
  TORCH_ARG(int64_t, d_out) = 0;  // output (value) dimension; 0: d_model
  TORCH_ARG(bool, bias) = false;
};

class LinearStoreImpl : public StoreModule<LinearStoreImpl, WritableStore> {
 public:
  explicit LinearStoreImpl(LinearStoreOptions options);
  void reset() override;
  // Appends N = M hidden units: W1 rows keys (M, d_model), W2 columns values (M, d_out). No bias.
  void write(const torch::Tensor& keys, const torch::Tensor& values) override;
  torch::Tensor forward(const torch::Tensor& x) override;           // (..., d_out)
  torch::Tensor recall_weights(const torch::Tensor& x) override;    // W1 x: (..., N)
  torch::Tensor keys() const override { return w1->weight; }        // (N, d_model)
  torch::Tensor values() const override { return w2->weight.t(); }  // (N, d_out)
  int64_t size() const override { return w1->weight.size(0); }
  std::optional<FeedForwardOptions> feed_forward_options() const override;

  LinearStoreOptions options;
  torch::nn::Linear w1{nullptr};  // d_model -> N
  torch::nn::Linear w2{nullptr};  // N -> d_out
};
TORCH_MODULE(LinearStore);

}  // namespace recall
