// Memory stores (docs/science.md §1). A store holds M memories, keys K (M, d_k) and values V (M,
// d_v), and recalls for queries X (Q, d_k)
//   f(X) = W(X) V,   W(X): (Q, M) recall weights
// Every store here is a torch module implementing this interface; make_store builds a written one
// by name, make_feed_forward (feed_forward.h) a learned one by kind.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "recall/core/torch.h"
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

struct FeedForwardOptions;  // feed_forward.h

// The interface of every store module (written, learned and context). A store is a torch module:
// Module is a virtual base of Store and of the torch::nn::Cloneable its class derives from, so
// each store is one module, holding all its state as registered parameters (learned memories) or
// buffers (written memories), and to(), parameters(), buffers(), clone(), torch::save and
// register_module see it all. A store derives from StoreModule below, which supplies
// clone_store().
class Store : public virtual torch::nn::Module {
 public:
  // The recall f(x) = W(x) V: queries (..., d_k) -> (..., d_v).
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  // The weights over the memories: (..., d_k) -> (..., M), so that forward(x) =
  // recall_weights(x) @ values() (plus the output bias where there is one). Learned stores: the
  // hidden activations; learned_kv and attention: per head, before their output projection.
  virtual torch::Tensor recall_weights(const torch::Tensor& x) = 0;
  // The memories: keys (M, d_k) and values (M, d_v), views of the registered state (learned_kv
  // and attention: per head, (H, M, d_head)).
  virtual torch::Tensor keys() const = 0;
  virtual torch::Tensor values() const = 0;
  virtual int64_t size() const = 0;  // M
  // The recall weights of queries q already in the keys' space, shaped like keys(): (n, d_k) ->
  // (n, M), so q = keys() asks each memory with its own key; learned_kv, per head (H, n, d_head) ->
  // (H, n, S), after its query projection. Default: recall_weights, whose input is the key space.
  virtual torch::Tensor key_weights(const torch::Tensor& q) { return recall_weights(q); }
  // The kind this module is as a feed-forward layer (make_feed_forward builds one like it from
  // these options: kind, activation or gate, hidden = size(), slots, heads, bias; a d_out other
  // than d_model aside); nullopt for the stores that are no feed-forward kind (written
  // outer_product, least_squares, delta, weight-function; attention).
  virtual std::optional<FeedForwardOptions> feed_forward_options() const;
  // A deep copy (StoreModule gives it).
  virtual std::shared_ptr<Store> clone_store() const = 0;
};

// The base of every store module XImpl: torch::nn::Cloneable<XImpl> and the store interface
// (Store or WritableStore), with clone_store() known statically, so no caller casts.
template <class Impl, class Interface>
class StoreModule : public torch::nn::Cloneable<Impl>, public Interface {
 public:
  std::shared_ptr<Store> clone_store() const override {
    // Cloneable::clone copies an Impl and returns its Module, a virtual base: back to the Impl
    // known here (never null)
    return std::dynamic_pointer_cast<Impl>(this->clone());
  }
};

// A store that memories are written into (the probe's stores, and the two-layer learned stores,
// whose hidden units a write appends).
class WritableStore : public Store {
 public:
  // Appends memories: keys (M, d_k), values (M, d_v), same float dtype (float32 or float64). The
  // first write into an empty store adopts that dtype; later writes must match it. Written
  // memories are state, not graph: no gradient flows back to what was written.
  virtual void write(const torch::Tensor& keys, const torch::Tensor& values) = 0;
};

// A deep copy of a store.
std::shared_ptr<Store> clone_store(const std::shared_ptr<Store>& store);

// Builds the store of `spec` for d_k, d_v (>= 1). Throws std::invalid_argument on bad sizes.
// linear, relu, relu2, relu3 and swiglu are the model's two-layer stores (linear, mlp, glu with a
// silu gate whose input weights equal its gate weights), written: each memory one hidden unit.
std::shared_ptr<WritableStore> make_store(const StoreSpec& spec, int64_t d_k, int64_t d_v);

namespace detail {
// Shared argument checks; messages name the argument and the accepted range.
void check_dims(int64_t d_k, int64_t d_v);
void check_memories(const torch::Tensor& keys, const torch::Tensor& values, int64_t d_k,
                    int64_t d_v);
void check_queries(const torch::Tensor& queries, int64_t d_k);
// x (..., d_k) with d_k = `d`, the input of the learned stores.
void check_features(const torch::Tensor& x, int64_t d);
// check_memories, and the dtype of a write into a store already holding `stored` (M, d_k) rows.
void check_write(const torch::Tensor& stored, const torch::Tensor& keys,
                 const torch::Tensor& values, int64_t d_k, int64_t d_v);
// Appends rows (dim 0) or columns (dim 1) to a registered buffer or parameter in place (the module
// keeps the same tensor, now longer); an empty one takes the dtype of `rows`.
void append_rows(torch::Tensor& state, const torch::Tensor& rows, int64_t dim = 0);
// The two-layer stores (linear, mlp, glu): hidden unit i is memory i, key the row i of W1
// (N, d_model), value the column i of W2 (d_out, N). Registers "w1" and "w2" on `module` (d_out =
// 0: d_model) after checking the sizes.
void register_two_layer(torch::nn::Module& module, torch::nn::Linear& w1, torch::nn::Linear& w2,
                        int64_t d_model, int64_t hidden, int64_t d_out, bool bias);
// Appends memories as hidden units: keys (M, d_model) to W1's rows (and to those of each of
// `also_keys`, the glu's input weights), values (M, d_out) to W2's columns. Refused with biases.
void write_two_layer(torch::nn::Linear& w1, torch::nn::Linear& w2, bool bias,
                     const torch::Tensor& keys, const torch::Tensor& values,
                     const std::vector<torch::nn::Linear*>& also_keys = {});
}  // namespace detail

}  // namespace recall
