// Weight-function store: f(x) = sum_i sigma(k_i . x) v_i. With sigma = relu^p it is a two-layer MLP
// whose first-layer rows are the keys and second-layer columns the values; with sigma = exp(beta s)
// and normalised weights it is softmax attention over the memories.
#pragma once
#include "recall/stores/key_value_memory.h"
#include "recall/stores/store.h"

namespace recall {

struct WeightStoreOptions {
  WeightStoreOptions(int64_t d_k, int64_t d_v, WeightFunction weight)
      : d_k_(d_k), d_v_(d_v), weight_(weight) {}
  TORCH_ARG(int64_t, d_k);
  TORCH_ARG(int64_t, d_v);
  TORCH_ARG(WeightFunction, weight);
};

class WeightStoreImpl : public torch::nn::Cloneable<WeightStoreImpl>, public Store {
 public:
  explicit WeightStoreImpl(WeightStoreOptions options);
  void reset() override;
  void write(const torch::Tensor& keys, const torch::Tensor& values) override;
  torch::Tensor recall(const torch::Tensor& queries) override;
  // sigma(X K^T): (Q, M); softmax rows are normalised (attention weights)
  torch::Tensor recall_weights(const torch::Tensor& queries) override;
  int64_t size() const override { return memory.size(); }
  torch::Tensor values() const override { return memory.values; }

  WeightStoreOptions options;
  KeyValueMemory memory;
};
TORCH_MODULE(WeightStore);

}  // namespace recall
