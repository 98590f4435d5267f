// Delta-rule store (online least squares, DeltaNet): for each memory in order,
//   S <- S + b k (v - S^T k)^T,   S: (d_k, d_v), recall S^T x.
// Each write is one step of gradient descent with rate b on || S^T k - v ||^2 / 2. S is linear in
// the values, S = K^T U with U = T V, T = (I + b tril(K K^T, -1))^{-1} b (the WY form), so the
// recall weights over the stored values are w(x) = T^T K x.
#pragma once
#include "recall/stores/key_value_memory.h"
#include "recall/stores/store.h"

namespace recall {

struct DeltaStoreOptions {
  DeltaStoreOptions(int64_t d_k, int64_t d_v) : d_k_(d_k), d_v_(d_v) {}
  TORCH_ARG(int64_t, d_k);
  TORCH_ARG(int64_t, d_v);
  TORCH_ARG(double, rate) = 1.0;  // b in (0, 2): 1 writes each memory exactly over its own key
};

class DeltaStoreImpl : public torch::nn::Cloneable<DeltaStoreImpl>, public Store {
 public:
  explicit DeltaStoreImpl(DeltaStoreOptions options);
  void reset() override;
  void write(const torch::Tensor& keys, const torch::Tensor& values) override;
  torch::Tensor recall(const torch::Tensor& queries) override;          // X S
  torch::Tensor recall_weights(const torch::Tensor& queries) override;  // X K^T T
  int64_t size() const override { return memory.size(); }
  torch::Tensor values() const override { return memory.values; }

  DeltaStoreOptions options;
  KeyValueMemory memory;
  torch::Tensor state;  // S: (d_k, d_v)
};
TORCH_MODULE(DeltaStore);

}  // namespace recall
