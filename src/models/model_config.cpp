#include "recall/models/model_config.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <optional>
#include <utility>

#include "recall/core/enum_names.h"
#include "recall/core/error.h"

namespace recall {

namespace {

constexpr std::array<const char*, 3> kPosNames = {"rope", "learned", "none"};
constexpr std::array<const char*, 2> kNormNames = {"rmsnorm", "layernorm"};

void check_min(const char* key, int64_t value, int64_t min) {
  check_arg(value >= min, fmt::format("{} = {}: must be >= {}", key, value, min));
}

int64_t read_int(const toml::node& node, const std::string& key) {
  auto v = node.value_exact<int64_t>();
  check_arg(v.has_value(), fmt::format("{}: must be an integer", key));
  return *v;
}

double read_real(const toml::node& node, const std::string& key) {
  std::optional<double> v = node.is_integer() ? std::optional<double>(*node.value<int64_t>())
                                              : node.value_exact<double>();
  check_arg(v.has_value(), fmt::format("{}: must be a number", key));
  return *v;
}

bool read_bool(const toml::node& node, const std::string& key) {
  auto v = node.value_exact<bool>();
  check_arg(v.has_value(), fmt::format("{}: must be true or false", key));
  return *v;
}

std::string read_string(const toml::node& node, const std::string& key) {
  auto v = node.value_exact<std::string>();
  check_arg(v.has_value(), fmt::format("{}: must be a string", key));
  return *v;
}

}  // namespace

std::string to_string(PosKind v) {
  return enum_name(kPosNames, v);
}
std::string to_string(NormKind v) {
  return enum_name(kNormNames, v);
}

PosKind pos_kind_from_string(const std::string& s) {
  return enum_from_name<PosKind>(kPosNames, s, "pos");
}
NormKind norm_kind_from_string(const std::string& s) {
  return enum_from_name<NormKind>(kNormNames, s, "norm");
}

void ModelConfig::validate() const {
  check_min("vocab_size", vocab_size, 1);
  check_min("d_model", d_model, 1);
  check_min("n_layers", n_layers, 1);
  check_min("n_heads", n_heads, 1);
  check_arg(d_model % n_heads == 0,
            fmt::format("d_model = {} is not divisible by n_heads = {}", d_model, n_heads));
  check_min("seq_len", seq_len, 2);  // L of the beta rules needs ln L > 0
  check_arg(pos != PosKind::kRope || head_dim() % 2 == 0,
            fmt::format("d_model / n_heads = {}: the head dimension must be even with pos = rope",
                        head_dim()));
  if (ffn == FfnKind::kLinear || ffn == FfnKind::kMlp || ffn == FfnKind::kGlu)
    check_min("ffn_mult", ffn_mult, 1);
  check_min("ffn_slots", ffn_slots, 0);
  if (ffn == FfnKind::kLearnedKv)
    check_arg(ffn_slots >= 1,
              fmt::format("ffn_slots = {}: must be >= 1 with ffn = learned_kv", ffn_slots));
  check_min("attn_mem_kv", attn_mem_kv, 0);
  check_arg(std::isfinite(attn_scale) && attn_scale > 0 && attn_scale <= 1024,
            fmt::format("attn_scale = {}: must be a number in (0, 1024] (1 is the standard "
                        "1 / sqrt(d_head))",
                        attn_scale));
  check_arg(
      attn_conv == 0 || (attn_conv >= 2 && attn_conv <= kMaxConv),
      fmt::format("attn_conv = {}: must be 0 (none) or a width in [2, {}]", attn_conv, kMaxConv));
}

const std::vector<std::string>& model_config_keys() {
  static const std::vector<std::string> keys = {
      "vocab_size", "d_model",   "n_layers",    "n_heads",    "seq_len",  "pos",
      "norm",       "tied_head", "bias",        "attn_rule",  "ffn",      "activation",
      "ffn_mult",   "ffn_slots", "attn_mem_kv", "attn_scale", "attn_conv"};
  return keys;
}

ModelConfig model_config_from_toml(const toml::table& table, std::vector<std::string>* used_keys) {
  ModelConfig c;
  const std::pair<const char*, int64_t*> ints[] = {
      {"vocab_size", &c.vocab_size}, {"d_model", &c.d_model},         {"n_layers", &c.n_layers},
      {"n_heads", &c.n_heads},       {"seq_len", &c.seq_len},         {"ffn_mult", &c.ffn_mult},
      {"ffn_slots", &c.ffn_slots},   {"attn_mem_kv", &c.attn_mem_kv}, {"attn_conv", &c.attn_conv}};
  for (const auto& [key, field] : ints)
    if (const toml::node* n = table.get(key)) *field = read_int(*n, key);
  if (const toml::node* n = table.get("attn_scale")) c.attn_scale = read_real(*n, "attn_scale");
  if (const toml::node* n = table.get("tied_head")) c.tied_head = read_bool(*n, "tied_head");
  if (const toml::node* n = table.get("bias")) c.bias = read_bool(*n, "bias");
  if (const toml::node* n = table.get("pos")) c.pos = pos_kind_from_string(read_string(*n, "pos"));
  if (const toml::node* n = table.get("norm"))
    c.norm = norm_kind_from_string(read_string(*n, "norm"));
  if (const toml::node* n = table.get("attn_rule"))
    c.attn_rule = beta_rule_from_string(read_string(*n, "attn_rule"));
  if (const toml::node* n = table.get("activation"))
    c.activation = activation_from_string(read_string(*n, "activation"));
  if (const toml::node* n = table.get("ffn")) {
    const std::string ffn = read_string(*n, "ffn");
    try {
      c.ffn = ffn == "swiglu" ? FfnKind::kGlu : ffn_kind_from_string(ffn);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(
          fmt::format("{}, or swiglu (glu with activation silu)", e.what()));
    }
    // swiglu fixes the gate: a preset's activation (say gelu) does not make it a GeGLU
    if (ffn == "swiglu") c.activation = Activation::kSilu;
  }
  if (used_keys)
    for (const auto& key : model_config_keys())
      if (table.contains(key)) used_keys->push_back(key);
  c.validate();
  return c;
}

}  // namespace recall
