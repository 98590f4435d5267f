// Delta-rule store (online least squares, DeltaNet): for each memory in order,
//   S <- S + b k (v - S^T k)^T,   S: (d_k, d_v), recall S^T x.
// Each write is one step of gradient descent with rate b on || S^T k - v ||^2 / 2. S is linear in
// the values, S = K^T U with U = T V, T = (I + b tril(K K^T, -1))^{-1} b (the WY form), so the
// recall weights over the stored values are w(x) = T^T K x.
#pragma once
#include "recall/stores/store.h"

namespace recall {

struct DeltaStoreOptions {
  DeltaStoreOptions(int64_t d_k, int64_t d_v) : d_k_(d_k), d_v_(d_v) {}
  TORCH_ARG(int64_t, d_k);
  TORCH_ARG(int64_t, d_v);
  TORCH_ARG(double, rate) = 1.0;  // b in (0, 2): 1 writes each memory exactly over its own key
};

class DeltaStoreImpl : public StoreModule<DeltaStoreImpl, WritableStore> {
 public:
  explicit DeltaStoreImpl(DeltaStoreOptions options);
  void reset() override;
  void write(const torch::Tensor& keys, const torch::Tensor& values) override;
  torch::Tensor forward(const torch::Tensor& x) override;         // X S: (Q, d_v)
  torch::Tensor recall_weights(const torch::Tensor& x) override;  // X K^T T: (Q, M)
  torch::Tensor keys() const override { return stored_keys; }
  torch::Tensor values() const override { return stored_values; }
  int64_t size() const override { return stored_keys.size(0); }

  DeltaStoreOptions options;
  torch::Tensor stored_keys;    // buffer "keys": (M, d_k)
  torch::Tensor stored_values;  // buffer "values": (M, d_v)
  torch::Tensor state;          // buffer "state": S (d_k, d_v)
};
TORCH_MODULE(DeltaStore);

}  // namespace recall
