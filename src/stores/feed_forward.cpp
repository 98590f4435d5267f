#include "recall/stores/feed_forward.h"

#include <fmt/format.h>

#include <array>

#include "recall/core/enum_names.h"
#include "recall/core/error.h"
#include "recall/stores/glu.h"
#include "recall/stores/learned_kv.h"
#include "recall/stores/linear.h"
#include "recall/stores/mlp.h"

namespace recall {

namespace {
constexpr std::array<const char*, 5> kFfnNames = {"linear", "mlp", "glu", "learned_kv", "none"};

// N of linear, mlp and glu
int64_t hidden_units(const FeedForwardOptions& o) {
  check_arg(o.hidden() >= 0,
            fmt::format("hidden = {}: must be >= 1 (0: mult x d_model)", o.hidden()));
  if (o.hidden() > 0) return o.hidden();
  check_arg(o.mult() >= 1, fmt::format("ffn_mult = {}: must be >= 1", o.mult()));
  return o.mult() * o.d_model();
}
}  // namespace

std::string to_string(FfnKind v) {
  return enum_name(kFfnNames, v);
}
FfnKind ffn_kind_from_string(const std::string& s) {
  return enum_from_name<FfnKind>(kFfnNames, s, "ffn");
}
const std::vector<FfnKind>& all_ffn_kinds() {
  static const std::vector<FfnKind> all = enum_values<FfnKind>(kFfnNames);
  return all;
}

std::shared_ptr<Store> make_feed_forward(const FeedForwardOptions& o) {
  const int64_t D = o.d_model();
  check_arg(o.kind() != FfnKind::kNone, "ffn = none has no feed-forward module");
  if (o.kind() == FfnKind::kLearnedKv)
    return std::make_shared<LearnedKvStoreImpl>(
        LearnedKvStoreOptions(D, o.slots()).n_heads(o.n_heads()).bias(o.bias()));
  const int64_t hidden = hidden_units(o);
  switch (o.kind()) {
    case FfnKind::kLinear:
      return std::make_shared<LinearStoreImpl>(LinearStoreOptions(D, hidden).bias(o.bias()));
    case FfnKind::kMlp:
      return std::make_shared<MlpStoreImpl>(
          MlpStoreOptions(D, hidden).activation(o.activation()).bias(o.bias()));
    case FfnKind::kGlu:
      return std::make_shared<GluStoreImpl>(
          GluStoreOptions(D, hidden).gate(o.activation()).bias(o.bias()));
    case FfnKind::kLearnedKv:
    case FfnKind::kNone:
      break;
  }
  throw std::invalid_argument("ffn: unknown kind");
}

int64_t feed_forward_num_parameters(const FeedForwardOptions& o) {
  const int64_t D = o.d_model(), b = o.bias() ? 1 : 0;
  switch (o.kind()) {
    case FfnKind::kLinear:
    case FfnKind::kMlp: {
      const int64_t N = hidden_units(o);
      return 2 * N * D + b * (N + D);
    }
    case FfnKind::kGlu: {
      const int64_t N = hidden_units(o);
      return 3 * N * D + b * (2 * N + D);
    }
    case FfnKind::kLearnedKv:  // keys and values (H, S, D / H) each, Wq and Wo (D, D)
      return 2 * o.slots() * D + 2 * D * D + b * 2 * D;
    case FfnKind::kNone:
      break;
  }
  return 0;
}

namespace {
// Whether a kind's name carries its activation.
bool has_activation(FfnKind kind) {
  return kind == FfnKind::kMlp || kind == FfnKind::kGlu;
}
}  // namespace

std::string feed_forward_name(FfnKind kind, Activation activation) {
  return has_activation(kind) ? to_string(kind) + "-" + to_string(activation) : to_string(kind);
}

std::vector<std::string> feed_forward_names() {
  return {"linear",   "mlp-relu", "mlp-relu2", "mlp-relu3", "mlp-gelu",
          "glu-silu", "glu-relu", "glu-relu2", "glu-gelu",  "learned_kv"};
}

std::pair<FfnKind, Activation> feed_forward_from_name(const std::string& name) {
  if (name == "swiglu") return {FfnKind::kGlu, Activation::kSilu};
  const Activation unused = FeedForwardOptions(1).activation();  // of linear and learned_kv
  for (FfnKind kind : all_ffn_kinds()) {
    if (kind == FfnKind::kNone) continue;
    if (!has_activation(kind)) {
      if (name == to_string(kind)) return {kind, unused};
      continue;
    }
    for (Activation a : all_activations())
      if (name == feed_forward_name(kind, a)) return {kind, a};
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
  switch (kind) {
    case FfnKind::kLinear:
      return StoreSpec::parse("linear");
    case FfnKind::kMlp:
      if (activation == Activation::kGelu || activation == Activation::kSilu ||
          activation == Activation::kGeluTanh)
        break;  // no written store of these activations
      return StoreSpec::parse(to_string(activation));
    case FfnKind::kGlu:
      if (activation == Activation::kSilu) return StoreSpec::parse("swiglu");
      break;
    case FfnKind::kLearnedKv:
      return StoreSpec::parse("softmax", beta);
    case FfnKind::kNone:
      break;
  }
  return std::nullopt;
}

}  // namespace recall
