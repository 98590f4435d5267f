// Outer-product (Hebbian) store: writing a memory adds v k^T to W (d_v, d_k); recall is W x, so the
// weight of memory i is k_i . x. One SGD step on a linear layer is such a write.
#pragma once
#include "recall/stores/key_value_memory.h"
#include "recall/stores/store.h"

namespace recall {

struct OuterProductStoreOptions {
  OuterProductStoreOptions(int64_t d_k, int64_t d_v) : d_k_(d_k), d_v_(d_v) {}
  TORCH_ARG(int64_t, d_k);
  TORCH_ARG(int64_t, d_v);
};

class OuterProductStoreImpl : public torch::nn::Cloneable<OuterProductStoreImpl>, public Store {
 public:
  explicit OuterProductStoreImpl(OuterProductStoreOptions options);
  void reset() override;
  void write(const torch::Tensor& keys, const torch::Tensor& values) override;
  torch::Tensor recall(const torch::Tensor& queries) override;  // X W^T
  torch::Tensor recall_weights(const torch::Tensor& queries) override;
  int64_t size() const override { return memory.size(); }
  torch::Tensor values() const override { return memory.values; }

  OuterProductStoreOptions options;
  KeyValueMemory memory;
  torch::Tensor weight;  // (d_v, d_k) = V^T K
};
TORCH_MODULE(OuterProductStore);

}  // namespace recall
