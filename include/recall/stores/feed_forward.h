// The feed-forward sublayer of a block is a learned memory store (docs/science.md §5), one of
//   linear     : W2 W1 x (linear.h)
//   mlp        : W2 sigma(W1 x), sigma = activation in relu, relu2, relu3, gelu, gelu_tanh (mlp.h)
//   glu        : W2 (gate(W1 x) * W3 x), gate = activation; silu is SwiGLU (glu.h)
//   learned_kv : softmax over ffn_slots learned key/value slots per head (learned_kv.h)
// (ffn = none has no sublayer; the block skips it.) Each kind is one row of feed_forward_kinds():
// its name, its module, its parameter count, its activation width, how fit starts it and the
// written store it is compared with. Adding a kind is a row there, its module, and its twin in
// python/recall_model.py (README, "Adding a store").
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "recall/core/torch.h"
#include "recall/stores/activation.h"
#include "recall/stores/store.h"

namespace recall {

enum class FfnKind { kLinear, kMlp, kGlu, kLearnedKv, kNone };
std::string to_string(FfnKind v);
// Throws std::invalid_argument naming the value and the accepted names. ("swiglu", accepted by
// the config for glu + silu, is resolved there, since it sets the activation too.)
FfnKind ffn_kind_from_string(const std::string& s);
// Every kind, in enum order (none last).
const std::vector<FfnKind>& all_ffn_kinds();

struct FeedForwardOptions {
  explicit FeedForwardOptions(int64_t d_model) : d_model_(d_model) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(FfnKind, kind) = FfnKind::kMlp;
  TORCH_ARG(Activation, activation) = Activation::kGelu;  // mlp: sigma; glu: the gate
  TORCH_ARG(int64_t, mult) = 4;     // linear, mlp, glu: hidden = mult * d_model
  TORCH_ARG(int64_t, hidden) = 0;   // linear, mlp, glu: N hidden units, >= 1; 0: mult * d_model
  TORCH_ARG(int64_t, slots) = 0;    // learned_kv
  TORCH_ARG(int64_t, n_heads) = 1;  // learned_kv
  TORCH_ARG(bool, bias) = false;
};

// One kind of feed-forward store: what the model, the trainer and fit know of it.
struct FeedForwardKind {
  FfnKind kind;
  const char* name;     // the ffn value: linear, mlp, glu, learned_kv
  bool has_activation;  // its one-word name carries the activation or gate (mlp-relu2, glu-silu)
  // The store module of this kind, d_model -> d_model. Throws std::invalid_argument for sizes out
  // of range.
  std::shared_ptr<Store> (*make)(const FeedForwardOptions& options);
  // The parameter count of make(options) without building it; a test holds it to the module's.
  int64_t (*num_parameters)(const FeedForwardOptions& options);
  // Hidden units per token, the activations the backward keeps (the trainer's and fit's RAM
  // estimates count three floats for each).
  int64_t (*activation_width)(const FeedForwardOptions& options);
  // Starts a store of this kind (made with hidden = slots = N, one head, on d = d_model) as fit
  // starts it: as a written store with keys of N(0, 1) entries (k . x ~ N(0, 1) for unit x) and
  // values of N(0, value_std^2) entries, value_std = 1 / sqrt(N d); parameters drawn from `gen`
  // in the order the module registers them.
  void (*start_for_fit)(Store& store, int64_t d, double value_std, at::Generator& gen);
  // The written store with the weight function of a learned store of this kind (and activation),
  // whose random-key theory the learned one is compared with; nullopt where there is none.
  // learned_kv's softmax has sharpness `beta` (the learned keys' norm decides it).
  std::optional<StoreSpec> (*written_spec)(Activation activation, double beta);
};

// Every kind but none, in FfnKind order.
const std::vector<FeedForwardKind>& feed_forward_kinds();
// The row of `kind`; throws std::invalid_argument for none.
const FeedForwardKind& feed_forward_kind(FfnKind kind);

// The store module of options.kind(), d_model -> d_model. Throws std::invalid_argument for
// kind none and for sizes out of range.
std::shared_ptr<Store> make_feed_forward(const FeedForwardOptions& options);
// The parameter count of make_feed_forward(options) without building it (0 for kind none), N
// hidden units, S slots per head, D = d_model:
//   linear, mlp: 2 N D (+ N + D biases);  glu: 3 N D (+ 2 N + D);
//   learned_kv: 2 S D + 2 D^2 (+ 2 D)
int64_t feed_forward_num_parameters(const FeedForwardOptions& options);

// A block's feed-forward store as a module holder, as torch::nn::Linear holds a LinearImpl: the
// module of any kind, behind the store interface (ffn->forward(x), ffn->recall_weights(x)).
class FeedForward : public torch::nn::ModuleHolder<Store> {
 public:
  using torch::nn::ModuleHolder<Store>::ModuleHolder;
};

// A kind spelled as one name, as `recall fit --kind` takes it: linear, mlp-<activation>,
// glu-<gate>, learned_kv; swiglu = glu-silu.
std::string feed_forward_name(FfnKind kind, Activation activation);
// The kind and activation of a name, for every kind and activation the config accepts; linear and
// learned_kv, which use none, get the default activation (FeedForwardOptions). Throws
// std::invalid_argument naming the value and the accepted names.
std::pair<FfnKind, Activation> feed_forward_from_name(const std::string& name);
// The kinds that the tests of every kind train and inspect: linear, mlp-relu, mlp-relu2,
// mlp-relu3, mlp-gelu, glu-silu, glu-relu, glu-relu2, glu-gelu, learned_kv (feed_forward_from_name
// also takes mlp-silu, mlp-gelu_tanh, glu-relu3 and glu-gelu_tanh).
std::vector<std::string> feed_forward_names();

// feed_forward_kind(kind).written_spec(activation, beta); nullopt for kind none.
std::optional<StoreSpec> written_store_spec(FfnKind kind, Activation activation, double beta);

}  // namespace recall
