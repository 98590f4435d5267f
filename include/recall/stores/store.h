// Memory stores (SPEC section 1). A store holds M memories, keys K (M, d_k) and values V (M, d_v),
// and recalls for queries X (Q, d_k)
//   f(X) = W(X) V,   W(X): (Q, M) recall weights
// Every store here is a torch module implementing this interface; make_store builds one by name.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "recall/stores/weight_function.h"

namespace recall {

enum class StoreKind {
  kOuterProduct,  // W = V^T K (Hebbian); weights k_i . x
  kLeastSquares,  // W = V^T (K^T)^+; weights (K^T)^+ x
  kDelta,         // online least squares, S <- S + b k (v - S^T k)^T
  kWeight,        // weights sigma(k_i . x): linear, relu^p, swiglu, exp series, softmax
};

// A store by its command-line name: outer_product, least_squares, delta, linear, relu, relu<p>,
// swiglu, exp<n>, softmax. beta is used by exp<n> and softmax.
struct StoreSpec {
  StoreKind kind = StoreKind::kOuterProduct;
  WeightFunction weight;  // kOuterProduct: linear; kWeight: its sigma

  // Throws std::invalid_argument naming the value and the accepted names.
  static StoreSpec parse(const std::string& name, double beta = 8.0);
  std::string name() const;
  // True when recall is sum_i sigma(k_i . x) v_i (the streaming probe's fast path applies).
  bool is_weight_function() const {
    return kind == StoreKind::kOuterProduct || kind == StoreKind::kWeight;
  }
};

// The default store list of the probe and the theory table.
std::vector<std::string> default_store_names();

class Store {
 public:
  virtual ~Store() = default;
  // Appends memories: keys (M, d_k), values (M, d_v), same float dtype (float32 or float64).
  virtual void write(const torch::Tensor& keys, const torch::Tensor& values) = 0;
  // (Q, d_k) -> (Q, d_v)
  virtual torch::Tensor recall(const torch::Tensor& queries) = 0;
  // (Q, d_k) -> (Q, M), so that recall(X) = recall_weights(X) @ V
  virtual torch::Tensor recall_weights(const torch::Tensor& queries) = 0;
  virtual int64_t size() const = 0;  // M
  virtual torch::Tensor values() const = 0;
};

// Builds the store of `spec` for d_k, d_v (>= 1). Throws std::invalid_argument on bad sizes.
std::shared_ptr<Store> make_store(const StoreSpec& spec, int64_t d_k, int64_t d_v);

namespace detail {
// Shared argument checks; messages name the argument and the accepted range.
void check_dims(int64_t d_k, int64_t d_v);
void check_memories(const torch::Tensor& keys, const torch::Tensor& values, int64_t d_k,
                    int64_t d_v);
void check_queries(const torch::Tensor& queries, int64_t d_k);
}  // namespace detail

}  // namespace recall
