// Weight-function store: f(x) = sum_i sigma(k_i . x) v_i over written keys and values. With
// sigma = relu^p it is a two-layer MLP whose first-layer rows are the keys and second-layer columns
// the values (make_store builds the mlp store itself for p <= 3); with sigma = exp(beta s) and
// normalised weights it is softmax attention over the memories.
#pragma once
#include "recall/stores/store.h"

namespace recall {

// The recall of this store as a function of its memories, differentiable in all of K (M, d_k),
// V (M, d_v) and X (Q, d_k): sigma(X K^T) V, softmax rows normalised.
torch::Tensor weight_function_weights(const WeightFunction& w, const torch::Tensor& K,
                                      const torch::Tensor& X);  // (Q, M)
torch::Tensor weight_function_recall(const WeightFunction& w, const torch::Tensor& K,
                                     const torch::Tensor& V, const torch::Tensor& X);  // (Q, d_v)

struct WeightFunctionStoreOptions {
  WeightFunctionStoreOptions(int64_t d_k, int64_t d_v, WeightFunction weight)
      : d_k_(d_k), d_v_(d_v), weight_(weight) {}
  TORCH_ARG(int64_t, d_k);
  TORCH_ARG(int64_t, d_v);
  TORCH_ARG(WeightFunction, weight);
};

class WeightFunctionStoreImpl : public StoreModule<WeightFunctionStoreImpl, WritableStore> {
 public:
  explicit WeightFunctionStoreImpl(WeightFunctionStoreOptions options);
  void reset() override;
  void write(const torch::Tensor& keys, const torch::Tensor& values) override;
  torch::Tensor forward(const torch::Tensor& x) override;
  // sigma(X K^T): (Q, M); softmax rows are normalised (attention weights)
  torch::Tensor recall_weights(const torch::Tensor& x) override;
  torch::Tensor keys() const override { return stored_keys; }
  torch::Tensor values() const override { return stored_values; }
  int64_t size() const override { return stored_keys.size(0); }

  WeightFunctionStoreOptions options;
  torch::Tensor stored_keys;    // buffer "keys": (M, d_k)
  torch::Tensor stored_values;  // buffer "values": (M, d_v)
};
TORCH_MODULE(WeightFunctionStore);

}  // namespace recall
