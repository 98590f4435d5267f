// Least-squares (optimal linear) store: W = V^T (K^T)^+ (d_v, d_k), the linear map with the
// smallest recall error on the stored keys. Weights (K^T)^+ x; exact recall while M <= d_k and the
// keys are independent. The pseudo-inverse is taken in float64 and cached until the next write.
#pragma once
#include "recall/stores/store.h"

namespace recall {

struct LeastSquaresStoreOptions {
  LeastSquaresStoreOptions(int64_t d_k, int64_t d_v) : d_k_(d_k), d_v_(d_v) {}
  TORCH_ARG(int64_t, d_k);
  TORCH_ARG(int64_t, d_v);
};

class LeastSquaresStoreImpl : public StoreModule<LeastSquaresStoreImpl, WritableStore> {
 public:
  explicit LeastSquaresStoreImpl(LeastSquaresStoreOptions options);
  void reset() override;
  void write(const torch::Tensor& keys, const torch::Tensor& values) override;
  torch::Tensor forward(const torch::Tensor& x) override;         // W(X) V: (Q, d_v)
  torch::Tensor recall_weights(const torch::Tensor& x) override;  // X K^+: (Q, M)
  torch::Tensor keys() const override { return stored_keys; }
  torch::Tensor values() const override { return stored_values; }
  int64_t size() const override { return stored_keys.size(0); }

  LeastSquaresStoreOptions options;
  torch::Tensor stored_keys;    // buffer "keys": (M, d_k)
  torch::Tensor stored_values;  // buffer "values": (M, d_v)

 private:
  torch::Tensor pinv_keys();  // K^+ : (d_k, M) in float64, a cache derived from the keys
  torch::Tensor pinv_;
};
TORCH_MODULE(LeastSquaresStore);

}  // namespace recall
