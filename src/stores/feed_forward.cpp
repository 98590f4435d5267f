#include "recall/stores/feed_forward.h"

#include <fmt/format.h>

#include <cmath>

#include "recall/core/error.h"
#include "recall/stores/glu.h"
#include "recall/stores/learned_kv.h"
#include "recall/stores/linear.h"
#include "recall/stores/mlp.h"

namespace recall {

namespace {

// N of linear, mlp and glu
int64_t hidden_units(const FeedForwardOptions& o) {
  check_arg(o.hidden() >= 0, fmt::format("FeedForwardOptions: hidden {} is negative (0: mult x "
                                         "d_model)",
                                         o.hidden()));
  if (o.hidden() > 0) return o.hidden();
  check_arg(o.mult() >= 1, fmt::format("FeedForwardOptions: mult {} is below 1", o.mult()));
  return o.mult() * o.d_model();
}

// The two-layer stores with `maps` N x D matrices (2: W1 and W2; glu 3: W3 too) and biases on the
// N hidden units of each input map and the D outputs.
int64_t two_layer_parameters(const FeedForwardOptions& o, int64_t maps) {
  const int64_t N = hidden_units(o), D = o.d_model(), b = o.bias() ? 1 : 0;
  return maps * N * D + b * ((maps - 1) * N + D);
}

// Two-layer stores as fit starts them: every parameter a key (W1, W3: N(0, 1) entries) but W2's
// weight, whose columns are the values.
void start_two_layer(Store& store, int64_t, double value_std, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  for (auto& item : store.named_parameters()) {
    torch::Tensor& p = item.value();
    const double scale = item.key() == "w2.weight" ? value_std : 1.0;
    p.copy_(torch::randn(p.sizes(), gen, torch::kFloat32) * scale);
  }
}

// learned_kv as fit starts it: Wq = sqrt(d) I (logits k . x), Wo = I, slot keys N(0, 1) entries,
// slot values N(0, value_std^2).
void start_learned_kv(Store& store, int64_t d, double value_std, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  for (auto& item : store.named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    if (name == "w1.weight") {
      p.copy_(torch::eye(d) * std::sqrt(static_cast<double>(d)));
    } else if (name == "w2.weight") {
      p.copy_(torch::eye(d));
    } else {
      const double scale = name == "values" ? value_std : 1.0;
      p.copy_(torch::randn(p.sizes(), gen, torch::kFloat32) * scale);
    }
  }
}

}  // namespace

const std::vector<FeedForwardKind>& feed_forward_kinds() {
  static const std::vector<FeedForwardKind> kinds = {
      {FfnKind::kLinear, "linear", /*has_activation=*/false,
       [](const FeedForwardOptions& o) -> std::shared_ptr<Store> {
         return std::make_shared<LinearStoreImpl>(
             LinearStoreOptions(o.d_model(), hidden_units(o)).bias(o.bias()));
       },
       [](const FeedForwardOptions& o) { return two_layer_parameters(o, 2); }, hidden_units,
       start_two_layer,
       // outer-product weights k . x
       [](Activation, double) -> std::optional<StoreSpec> { return StoreSpec::parse("linear"); }},
      {FfnKind::kMlp, "mlp", /*has_activation=*/true,
       [](const FeedForwardOptions& o) -> std::shared_ptr<Store> {
         return std::make_shared<MlpStoreImpl>(MlpStoreOptions(o.d_model(), hidden_units(o))
                                                   .activation(o.activation())
                                                   .bias(o.bias()));
       },
       [](const FeedForwardOptions& o) { return two_layer_parameters(o, 2); }, hidden_units,
       start_two_layer,
       // relu<p> alone: no written store has the gelu or silu weights
       [](Activation a, double) -> std::optional<StoreSpec> {
         if (a == Activation::kGelu || a == Activation::kSilu || a == Activation::kGeluTanh)
           return std::nullopt;
         return StoreSpec::parse(to_string(a));
       }},
      {FfnKind::kGlu, "glu", /*has_activation=*/true,
       [](const FeedForwardOptions& o) -> std::shared_ptr<Store> {
         return std::make_shared<GluStoreImpl>(
             GluStoreOptions(o.d_model(), hidden_units(o)).gate(o.activation()).bias(o.bias()));
       },
       [](const FeedForwardOptions& o) { return two_layer_parameters(o, 3); },
       [](const FeedForwardOptions& o) { return 2 * hidden_units(o); },  // gate and value
       start_two_layer,
       // the silu gate with gate and input weights equal is swiglu; no store of the others
       [](Activation a, double) -> std::optional<StoreSpec> {
         if (a != Activation::kSilu) return std::nullopt;
         return StoreSpec::parse("swiglu");
       }},
      {FfnKind::kLearnedKv, "learned_kv", /*has_activation=*/false,
       [](const FeedForwardOptions& o) -> std::shared_ptr<Store> {
         return std::make_shared<LearnedKvStoreImpl>(
             LearnedKvStoreOptions(o.d_model(), o.slots()).n_heads(o.n_heads()).bias(o.bias()));
       },
       // keys and values (H, S, D / H) each, Wq and Wo (D, D)
       [](const FeedForwardOptions& o) {
         const int64_t D = o.d_model(), b = o.bias() ? 1 : 0;
         return 2 * o.slots() * D + 2 * D * D + b * 2 * D;
       },
       [](const FeedForwardOptions& o) { return o.n_heads() * o.slots(); },  // weights (H, S)
       start_learned_kv,
       [](Activation, double beta) -> std::optional<StoreSpec> {
         return StoreSpec::parse("softmax", beta);
       }},
  };
  return kinds;
}

const FeedForwardKind& feed_forward_kind(FfnKind kind) {
  for (const auto& row : feed_forward_kinds())
    if (row.kind == kind) return row;
  throw std::invalid_argument("ffn = none has no feed-forward module");
}

std::string to_string(FfnKind v) {
  return v == FfnKind::kNone ? "none" : feed_forward_kind(v).name;
}

FfnKind ffn_kind_from_string(const std::string& s) {
  std::string accepted;
  for (const auto& row : feed_forward_kinds()) {
    if (s == row.name) return row.kind;
    accepted += std::string(row.name) + ", ";
  }
  if (s == "none") return FfnKind::kNone;
  throw std::invalid_argument(fmt::format("ffn '{}' is unknown: use one of {}none", s, accepted));
}

const std::vector<FfnKind>& all_ffn_kinds() {
  static const std::vector<FfnKind> all = [] {
    std::vector<FfnKind> kinds;
    for (const auto& row : feed_forward_kinds()) kinds.push_back(row.kind);
    kinds.push_back(FfnKind::kNone);
    return kinds;
  }();
  return all;
}

std::shared_ptr<Store> make_feed_forward(const FeedForwardOptions& o) {
  return feed_forward_kind(o.kind()).make(o);
}

int64_t feed_forward_num_parameters(const FeedForwardOptions& o) {
  return o.kind() == FfnKind::kNone ? 0 : feed_forward_kind(o.kind()).num_parameters(o);
}

std::string feed_forward_name(FfnKind kind, Activation activation) {
  return feed_forward_kind(kind).has_activation ? to_string(kind) + "-" + to_string(activation)
                                                : to_string(kind);
}

std::vector<std::string> feed_forward_names() {
  return {"linear",   "mlp-relu", "mlp-relu2", "mlp-relu3", "mlp-gelu",
          "glu-silu", "glu-relu", "glu-relu2", "glu-gelu",  "learned_kv"};
}

std::pair<FfnKind, Activation> feed_forward_from_name(const std::string& name) {
  if (name == "swiglu") return {FfnKind::kGlu, Activation::kSilu};
  const Activation unused = FeedForwardOptions(1).activation();  // of linear and learned_kv
  for (const auto& row : feed_forward_kinds()) {
    if (!row.has_activation) {
      if (name == row.name) return {row.kind, unused};
      continue;
    }
    for (Activation a : all_activations())
      if (name == feed_forward_name(row.kind, a)) return {row.kind, a};
  }
  std::string activations;
  for (Activation a : all_activations())
    activations += (activations.empty() ? "" : ", ") + to_string(a);
  throw std::invalid_argument(
      fmt::format("kind '{}' is unknown: use linear, mlp-<activation>, glu-<activation> or "
                  "learned_kv, with activation one of {} (swiglu = glu-silu)",
                  name, activations));
}

std::optional<StoreSpec> written_store_spec(FfnKind kind, Activation activation, double beta) {
  if (kind == FfnKind::kNone) return std::nullopt;
  return feed_forward_kind(kind).written_spec(activation, beta);
}

}  // namespace recall
