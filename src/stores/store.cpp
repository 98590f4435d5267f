#include "recall/stores/store.h"

#include <fmt/format.h>

#include <cctype>

#include "recall/core/error.h"
#include "recall/stores/delta.h"
#include "recall/stores/feed_forward.h"
#include "recall/stores/glu.h"
#include "recall/stores/init.h"
#include "recall/stores/least_squares.h"
#include "recall/stores/linear.h"
#include "recall/stores/mlp.h"
#include "recall/stores/outer_product.h"
#include "recall/stores/weight_function_store.h"

namespace recall {

namespace {
// "relu7" -> 7 when name = prefix + digits; -1 otherwise.
int numeric_suffix(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string digits = name.substr(prefix.size());
  if (digits.size() > 3) return -1;
  for (char c : digits)
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
  return std::stoi(digits);
}
}  // namespace

StoreSpec StoreSpec::parse(const std::string& name, double beta) {
  StoreSpec spec;
  WeightFunction& w = spec.weight;
  w.beta = beta;
  if (name == "outer_product") {
    spec.kind = StoreKind::kOuterProduct;
  } else if (name == "least_squares") {
    spec.kind = StoreKind::kLeastSquares;
  } else if (name == "delta") {
    spec.kind = StoreKind::kDelta;
  } else {
    spec.kind = StoreKind::kWeight;
    if (name == "linear") {
      w.kind = WeightKind::kLinear;
    } else if (name == "relu") {
      w.kind = WeightKind::kReluPow, w.p = 1;
    } else if (int p = numeric_suffix(name, "relu"); p >= 0) {
      w.kind = WeightKind::kReluPow, w.p = p;
    } else if (name == "swiglu") {
      w.kind = WeightKind::kSwiglu;
    } else if (int n = numeric_suffix(name, "exp"); n >= 0) {
      w.kind = WeightKind::kExpSeries, w.n = n;
    } else if (name == "softmax") {
      w.kind = WeightKind::kSoftmax;
    } else {
      throw std::invalid_argument(fmt::format(
          "store '{}' is unknown: use outer_product, least_squares, delta, linear, relu, relu<p> "
          "(p >= 1), swiglu, exp<n> (n >= 1 terms) or softmax",
          name));
    }
  }
  spec.weight.validate();
  return spec;
}

std::string StoreSpec::name() const {
  switch (kind) {
    case StoreKind::kOuterProduct:
      return "outer_product";
    case StoreKind::kLeastSquares:
      return "least_squares";
    case StoreKind::kDelta:
      return "delta";
    case StoreKind::kWeight:
      break;
  }
  switch (weight.kind) {
    case WeightKind::kLinear:
      return "linear";
    case WeightKind::kReluPow:
      return weight.p == 1 ? "relu" : fmt::format("relu{}", weight.p);
    case WeightKind::kSwiglu:
      return "swiglu";
    case WeightKind::kExpSeries:
      return fmt::format("exp{}", weight.n);
    case WeightKind::kSoftmax:
      return "softmax";
  }
  return "?";
}

std::vector<std::string> default_store_names() {
  return {"outer_product", "least_squares", "relu", "relu2", "relu3",
          "swiglu",        "exp2",          "exp3", "exp4",  "softmax"};
}

std::shared_ptr<WritableStore> make_store(const StoreSpec& spec, int64_t d_k, int64_t d_v) {
  detail::check_dims(d_k, d_v);
  switch (spec.kind) {
    case StoreKind::kOuterProduct:
      return std::make_shared<OuterProductStoreImpl>(OuterProductStoreOptions(d_k, d_v));
    case StoreKind::kLeastSquares:
      return std::make_shared<LeastSquaresStoreImpl>(LeastSquaresStoreOptions(d_k, d_v));
    case StoreKind::kDelta:
      return std::make_shared<DeltaStoreImpl>(DeltaStoreOptions(d_k, d_v));
    case StoreKind::kWeight:
      break;
  }
  const WeightFunction& w = spec.weight;
  if (w.kind == WeightKind::kLinear)
    return std::make_shared<LinearStoreImpl>(LinearStoreOptions(d_k, 0).d_out(d_v));
  if (w.kind == WeightKind::kReluPow && w.p <= 3) {
    const Activation a =
        w.p == 1 ? Activation::kRelu : (w.p == 2 ? Activation::kRelu2 : Activation::kRelu3);
    return std::make_shared<MlpStoreImpl>(MlpStoreOptions(d_k, 0).d_out(d_v).activation(a));
  }
  if (w.kind == WeightKind::kSwiglu)  // s silu(s): the silu GLU with input weights = gate weights
    return std::make_shared<GluStoreImpl>(
        GluStoreOptions(d_k, 0).d_out(d_v).gate(Activation::kSilu));
  return std::make_shared<WeightFunctionStoreImpl>(
      WeightFunctionStoreOptions(d_k, d_v, spec.weight));
}

namespace detail {

void check_dims(int64_t d_k, int64_t d_v) {
  check_arg(d_k >= 1, fmt::format("d_k = {}: the key dimension must be >= 1", d_k));
  check_arg(d_v >= 1, fmt::format("d_v = {}: the value dimension must be >= 1", d_v));
}

void check_memories(const torch::Tensor& keys, const torch::Tensor& values, int64_t d_k,
                    int64_t d_v) {
  check_arg(keys.dim() == 2 && keys.size(1) == d_k,
            fmt::format("keys: shape {} must be (M, d_k = {})", c10::str(keys.sizes()), d_k));
  check_arg(values.dim() == 2 && values.size(1) == d_v,
            fmt::format("values: shape {} must be (M, d_v = {})", c10::str(values.sizes()), d_v));
  check_arg(
      keys.size(0) == values.size(0),
      fmt::format("keys and values: counts {} and {} must be equal", keys.size(0), values.size(0)));
  check_arg(keys.scalar_type() == values.scalar_type() &&
                (keys.scalar_type() == torch::kFloat32 || keys.scalar_type() == torch::kFloat64),
            "keys and values: dtype must be float32 or float64, and the same for both");
  check_arg(torch::isfinite(keys).all().item<bool>(), "keys: every entry must be finite");
  check_arg(torch::isfinite(values).all().item<bool>(), "values: every entry must be finite");
}

void check_queries(const torch::Tensor& queries, int64_t d_k) {
  check_arg(queries.dim() == 2 && queries.size(1) == d_k,
            fmt::format("queries: shape {} must be (Q, d_k = {})", c10::str(queries.sizes()), d_k));
}

void check_features(const torch::Tensor& x, int64_t d) {
  check_arg(x.dim() >= 1 && x.size(-1) == d,
            fmt::format("input: shape {} must be (..., d_k = {})", c10::str(x.sizes()), d));
}

void check_write(const torch::Tensor& stored, const torch::Tensor& keys,
                 const torch::Tensor& values, int64_t d_k, int64_t d_v) {
  check_memories(keys, values, d_k, d_v);
  if (stored.size(0) > 0)
    check_arg(keys.scalar_type() == stored.scalar_type(),
              fmt::format("keys: dtype {} must match the stored keys' {}",
                          c10::toString(keys.scalar_type()), c10::toString(stored.scalar_type())));
}

void append_rows(torch::Tensor& state, const torch::Tensor& rows, int64_t dim) {
  torch::NoGradGuard no_grad;
  auto r = rows.detach();
  // set_data keeps the registered tensor (the module's entry) and gives it the longer contents
  state.set_data(state.size(dim) == 0 ? r.clone() : torch::cat({state.detach(), r}, dim));
}

void register_two_layer(torch::nn::Module& module, torch::nn::Linear& w1, torch::nn::Linear& w2,
                        int64_t d_model, int64_t hidden, int64_t d_out, bool bias) {
  const int64_t out = d_out > 0 ? d_out : d_model;
  check_dims(d_model, out);
  check_arg(hidden >= 0, fmt::format("hidden = {}: must be >= 0", hidden));
  w1 = module.register_module("w1", make_linear(d_model, hidden, bias));
  w2 = module.register_module("w2", make_linear(hidden, out, bias));
}

void write_two_layer(torch::nn::Linear& w1, torch::nn::Linear& w2, bool bias,
                     const torch::Tensor& keys, const torch::Tensor& values,
                     const std::vector<torch::nn::Linear*>& also_keys) {
  check_arg(!bias, "write: a store with biases cannot be written");
  check_write(w1->weight, keys, values, w1->weight.size(1), w2->weight.size(0));
  append_rows(w1->weight, keys);
  for (auto* w : also_keys) append_rows((*w)->weight, keys);
  append_rows(w2->weight, values.t(), 1);
}

}  // namespace detail

std::optional<FeedForwardOptions> Store::feed_forward_options() const {
  return std::nullopt;
}

std::shared_ptr<Store> clone_store(const std::shared_ptr<Store>& store) {
  check_arg(store != nullptr, "store: none");
  return store->clone_store();
}

}  // namespace recall
