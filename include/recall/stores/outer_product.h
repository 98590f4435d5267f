// Outer-product (Hebbian) store: writing a memory adds v k^T to W (d_v, d_k); recall is W x, so the
// weight of memory i is k_i . x. One SGD step on a linear layer is such a write.
#pragma once
#include "recall/stores/store.h"

namespace recall {

struct OuterProductStoreOptions {
  OuterProductStoreOptions(int64_t d_k, int64_t d_v) : d_k_(d_k), d_v_(d_v) {}
  TORCH_ARG(int64_t, d_k);
  TORCH_ARG(int64_t, d_v);
};

class OuterProductStoreImpl : public StoreModule<OuterProductStoreImpl, WritableStore> {
 public:
  explicit OuterProductStoreImpl(OuterProductStoreOptions options);
  void reset() override;
  void write(const torch::Tensor& keys, const torch::Tensor& values) override;
  torch::Tensor forward(const torch::Tensor& x) override;         // (Q, d_k) -> X W^T (Q, d_v)
  torch::Tensor recall_weights(const torch::Tensor& x) override;  // X K^T: (Q, M)
  torch::Tensor keys() const override { return stored_keys; }
  torch::Tensor values() const override { return stored_values; }
  int64_t size() const override { return stored_keys.size(0); }

  OuterProductStoreOptions options;
  torch::Tensor stored_keys;    // buffer "keys": (M, d_k)
  torch::Tensor stored_values;  // buffer "values": (M, d_v)
  torch::Tensor weight;         // buffer "weight": (d_v, d_k) = V^T K
};
TORCH_MODULE(OuterProductStore);

}  // namespace recall
