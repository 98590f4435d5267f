// Least-squares (optimal linear) store: W = V^T (K^T)^+ (d_v, d_k), the linear map with the
// smallest recall error on the stored keys. Weights (K^T)^+ x; exact recall while M <= d_k and the
// keys are independent. The pseudo-inverse is taken in float64 and cached until the next write.
#pragma once
#include "recall/stores/key_value_memory.h"
#include "recall/stores/store.h"

namespace recall {

struct LeastSquaresStoreOptions {
  LeastSquaresStoreOptions(int64_t d_k, int64_t d_v) : d_k_(d_k), d_v_(d_v) {}
  TORCH_ARG(int64_t, d_k);
  TORCH_ARG(int64_t, d_v);
};

class LeastSquaresStoreImpl : public torch::nn::Cloneable<LeastSquaresStoreImpl>, public Store {
 public:
  explicit LeastSquaresStoreImpl(LeastSquaresStoreOptions options);
  void reset() override;
  void write(const torch::Tensor& keys, const torch::Tensor& values) override;
  torch::Tensor recall(const torch::Tensor& queries) override;
  torch::Tensor recall_weights(const torch::Tensor& queries) override;  // X K^{+T}... (Q, M)
  int64_t size() const override { return memory.size(); }
  torch::Tensor values() const override { return memory.values; }

  LeastSquaresStoreOptions options;
  KeyValueMemory memory;

 private:
  torch::Tensor pinv_keys();  // (K^T)^+ transposed = K^+ : (d_k, M), cached
  torch::Tensor pinv_;
};
TORCH_MODULE(LeastSquaresStore);

}  // namespace recall
