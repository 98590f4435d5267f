// The learned key-value store (ffn = learned_kv, persistent memory, Sukhbaatar et al. 2019): per
// head h, softmax(q_h K_h^T / sqrt(d_head)) V_h over S learned key and value slots, q = Wq x, then
// the output projection Wo.
//   x (..., d_model) -> q (..., H, d_head) -> weights (..., H, S) -> (..., H, d_head) -> Wo
#pragma once
#include "recall/stores/store.h"

namespace recall {

struct LearnedKvStoreOptions {
  LearnedKvStoreOptions(int64_t d_model, int64_t slots) : d_model_(d_model), slots_(slots) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, slots);  // S per head, >= 1
  TORCH_ARG(int64_t, n_heads) = 1;
  TORCH_ARG(bool, bias) = false;
};

class LearnedKvStoreImpl : public StoreModule<LearnedKvStoreImpl, Store> {
 public:
  explicit LearnedKvStoreImpl(LearnedKvStoreOptions options);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x) override;         // (..., d_model)
  torch::Tensor recall_weights(const torch::Tensor& x) override;  // (..., H, S), rows sum to 1
  torch::Tensor keys() const override { return slot_keys; }       // (H, S, d_head)
  torch::Tensor values() const override { return slot_values; }   // (H, S, d_head)
  int64_t size() const override { return slot_keys.size(0) * slot_keys.size(1); }  // H S
  // per head: q (H, n, d_head) -> softmax(q K_h^T / sqrt(d_head)) (H, n, S), the weights after Wq
  torch::Tensor key_weights(const torch::Tensor& q) override;
  std::optional<FeedForwardOptions> feed_forward_options() const override;
  int64_t d_head() const { return options.d_model() / options.n_heads(); }

  LearnedKvStoreOptions options;
  torch::nn::Linear wq{nullptr};  // the query map Wq: d_model -> d_model (state "w1")
  torch::nn::Linear wo{nullptr};  // the output map Wo: d_model -> d_model (state "w2")
  torch::Tensor slot_keys;        // parameter "keys": (H, S, d_head)
  torch::Tensor slot_values;      // parameter "values": (H, S, d_head)
};
TORCH_MODULE(LearnedKvStore);

}  // namespace recall
