// The model keys: one table with each key's type, bounds and field, used for reading, printing and
// validating, so a bound is written once (the upper bounds keep a typo from asking for terabytes).
#include "recall/models/model_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cmath>
#include <filesystem>

#include "recall/core/config_keys.h"
#include "recall/core/enum_names.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/stores/attention.h"

namespace recall {

namespace {

constexpr std::array<const char*, 3> kPosNames = {"rope", "learned", "none"};
constexpr std::array<const char*, 2> kNormNames = {"rmsnorm", "layernorm"};

// An integer key's bounds, checked by the reader and by validate() alike.
struct IntBound {
  const char* name;
  ConfigField<ModelConfig, int64_t> field;
  int64_t lo, hi;
};

#define RECALL_MODEL_FIELD(type, member) RECALL_CONFIG_FIELD(ModelConfig, type, c.member)

const std::vector<IntBound>& int_bounds() {
  static const std::vector<IntBound> table = {
      {"vocab_size", RECALL_MODEL_FIELD(int64_t, vocab_size), 1, 1 << 20},
      {"d_model", RECALL_MODEL_FIELD(int64_t, d_model), 1, 1 << 16},
      {"n_layers", RECALL_MODEL_FIELD(int64_t, n_layers), 1, 1024},
      {"n_heads", RECALL_MODEL_FIELD(int64_t, n_heads), 1, 1024},
      // L of the beta rules needs ln L > 0
      {"seq_len", RECALL_MODEL_FIELD(int64_t, seq_len), 2, 1 << 20},
      {"ffn_mult", RECALL_MODEL_FIELD(int64_t, ffn_mult), 1, 64},
      {"ffn_slots", RECALL_MODEL_FIELD(int64_t, ffn_slots), 0, 1 << 20},
      {"attn_mem_kv", RECALL_MODEL_FIELD(int64_t, attn_mem_kv), 0, 1 << 20},
      // 1 is refused by validate(): a convolution of width 1 is a per-channel scale
      {"attn_conv", RECALL_MODEL_FIELD(int64_t, attn_conv), 0, kMaxConv},
      {"n_kv_heads", RECALL_MODEL_FIELD(int64_t, n_kv_heads), 0, 1024},
      {"d_head", RECALL_MODEL_FIELD(int64_t, d_head), 0, 1 << 16},
      {"intermediate_size", RECALL_MODEL_FIELD(int64_t, intermediate_size), 0, 1 << 24}};
  return table;
}

constexpr double kMaxScale = 1024;
// RoPE's base: above 1 for frequencies that fall with the channel; 1e12 is beyond any model's.
constexpr double kMaxRopeBase = 1e12;
// A norm's eps: positive (a zero row would divide by zero), and far below a unit mean square.
constexpr double kMaxNormEps = 0.1;

// ffn also accepts "swiglu", the GLU with the silu gate; a shape's activation (say gelu) does not
// make it a GeGLU.
ConfigKey<ModelConfig> ffn_key() {
  const std::string ok =
      "one of linear, mlp, glu, learned_kv, none, or swiglu (glu with "
      "activation silu)";
  return {"ffn",
          [ok](ModelConfig& c, const toml::node& n) {
            auto v = n.value_exact<std::string>();
            if (!v) bad_config_value("ffn", n, ok);
            if (*v == "swiglu") {
              c.ffn = FfnKind::kGlu;
              c.activation = Activation::kSilu;
              return;
            }
            try {
              c.ffn = ffn_kind_from_string(*v);
            } catch (const std::invalid_argument&) {
              bad_config_value("ffn", n, ok);
            }
          },
          [](const ModelConfig& c) { return toml_string(to_string(c.ffn)); }};
}

// In model_config_keys() order.
const std::vector<ConfigKey<ModelConfig>>& keys() {
  static const std::vector<ConfigKey<ModelConfig>> table = [] {
    std::vector<ConfigKey<ModelConfig>> t;
    auto int_of = [](const char* name) {
      for (const IntBound& b : int_bounds())
        if (std::string(b.name) == name) return int_key<ModelConfig>(b.name, b.field, b.lo, b.hi);
      throw std::logic_error(name);
    };
    for (const char* name : {"vocab_size", "d_model", "n_layers", "n_heads", "seq_len"})
      t.push_back(int_of(name));
    t.push_back(enum_key<ModelConfig>("pos", RECALL_MODEL_FIELD(PosKind, pos), pos_kind_from_string,
                                      to_string));
    t.push_back(enum_key<ModelConfig>("norm", RECALL_MODEL_FIELD(NormKind, norm),
                                      norm_kind_from_string, to_string));
    t.push_back(bool_key<ModelConfig>("tied_head", RECALL_MODEL_FIELD(bool, tied_head)));
    t.push_back(bool_key<ModelConfig>("bias", RECALL_MODEL_FIELD(bool, bias)));
    t.push_back(enum_key<ModelConfig>("attn_rule", RECALL_MODEL_FIELD(BetaRule, attn_rule),
                                      beta_rule_from_string, to_string));
    t.push_back(ffn_key());
    t.push_back(enum_key<ModelConfig>("activation", RECALL_MODEL_FIELD(Activation, activation),
                                      activation_from_string, to_string));
    for (const char* name : {"ffn_mult", "ffn_slots", "attn_mem_kv"}) t.push_back(int_of(name));
    t.push_back(real_key<ModelConfig>("attn_scale", RECALL_MODEL_FIELD(double, attn_scale), 0, true,
                                      kMaxScale));
    t.push_back(int_of("attn_conv"));
    t.push_back(bool_key<ModelConfig>("attn_qk_norm", RECALL_MODEL_FIELD(bool, attn_qk_norm)));
    t.push_back(
        bool_key<ModelConfig>("attn_scale_learned", RECALL_MODEL_FIELD(bool, attn_scale_learned)));
    t.push_back(real_key<ModelConfig>("rope_base", RECALL_MODEL_FIELD(double, rope_base), 1, true,
                                      kMaxRopeBase));
    for (const char* name : {"n_kv_heads", "d_head"}) t.push_back(int_of(name));
    t.push_back(real_key<ModelConfig>("norm_eps", RECALL_MODEL_FIELD(double, norm_eps), 0, true,
                                      kMaxNormEps));
    t.push_back(bool_key<ModelConfig>("qkv_bias", RECALL_MODEL_FIELD(bool, qkv_bias)));
    t.push_back(
        bool_key<ModelConfig>("attn_qk_rmsnorm", RECALL_MODEL_FIELD(bool, attn_qk_rmsnorm)));
    t.push_back(int_of("intermediate_size"));
    return t;
  }();
  return table;
}

#undef RECALL_MODEL_FIELD

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
  for (const IntBound& b : int_bounds()) {
    const int64_t v = b.field(const_cast<ModelConfig&>(*this));
    check_arg(v >= b.lo && v <= b.hi,
              fmt::format("{} = {}: must be an integer in [{}, {}]", b.name, v, b.lo, b.hi));
  }
  // with d_head given, the heads' width H d_head need not be d_model: q and the output map between
  check_arg(d_head > 0 || d_model % n_heads == 0,
            fmt::format("d_model = {} is not divisible by n_heads = {}; set d_head to give the "
                        "heads a width of their own",
                        d_model, n_heads));
  check_arg(pos != PosKind::kRope || head_dim() % 2 == 0,
            d_head > 0 ? fmt::format("d_head = {}: must be even with pos = rope", d_head)
                       : fmt::format("d_model / n_heads = {}: the head dimension must be even "
                                     "with pos = rope",
                                     head_dim()));
  check_arg(n_heads % kv_heads() == 0,
            fmt::format("n_heads = {} is not a multiple of n_kv_heads = {}: each key/value head "
                        "serves the same number of query heads",
                        n_heads, kv_heads()));
  check_arg(!(attn_qk_norm && attn_qk_rmsnorm),
            "attn_qk_norm = true and attn_qk_rmsnorm = true: a head's query and key are normed "
            "one way; set one of them");
  check_arg(intermediate_size == 0 || ffn == FfnKind::kLinear || ffn == FfnKind::kMlp ||
                ffn == FfnKind::kGlu,
            fmt::format("intermediate_size = {}: the width of a linear, mlp or glu feed-forward; "
                        "with ffn = {} it must be 0",
                        intermediate_size, to_string(ffn)));
  check_arg(std::isfinite(rope_base) && rope_base > 1 && rope_base <= kMaxRopeBase,
            fmt::format("rope_base = {}: must be a number in (1, {}]", rope_base, kMaxRopeBase));
  check_arg(std::isfinite(norm_eps) && norm_eps > 0 && norm_eps <= kMaxNormEps,
            fmt::format("norm_eps = {}: must be a number in (0, {}]", norm_eps, kMaxNormEps));
  if (ffn == FfnKind::kLearnedKv)
    check_arg(ffn_slots >= 1,
              fmt::format("ffn_slots = {}: must be >= 1 with ffn = learned_kv", ffn_slots));
  check_arg(std::isfinite(attn_scale) && attn_scale > 0 && attn_scale <= kMaxScale,
            fmt::format("attn_scale = {}: must be a number in (0, {}] (1 is the standard "
                        "1 / sqrt(d_head))",
                        attn_scale, kMaxScale));
  check_arg(attn_conv != 1, fmt::format("attn_conv = {}: must be 0 (none) or a width in [2, {}]",
                                        attn_conv, kMaxConv));
}

const std::vector<std::string>& model_config_keys() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& key : keys()) n.push_back(key.name);
    return n;
  }();
  return names;
}

std::vector<std::pair<std::string, std::string>> model_config_items(const ModelConfig& config) {
  return config_key_items(keys(), config);
}

ModelConfig model_config_from_toml(const toml::table& table, const ModelConfig& base) {
  ModelConfig c = base;
  read_config_keys(keys(), table, c);
  // swiglu fixes the gate whatever activation the table also holds
  if (table["ffn"].value_or(std::string()) == "swiglu") c.activation = Activation::kSilu;
  c.validate();
  return c;
}

toml::table read_model_shape(const std::string& shape, const std::string& base_dir) {
  namespace fs = std::filesystem;
  const fs::path file =
      fs::path(shape).is_absolute() ? fs::path(shape) : fs::path(base_dir) / shape;
  std::error_code ec;
  std::string text, source;
  if (fs::is_regular_file(file, ec)) {
    text = read_file("model", file.string());
    source = file.string();
  } else if (const auto preset = model_shape_toml(shape)) {
    text = std::string(*preset);
    source = "model shape " + shape;
  } else {
    throw UsageError(
        fmt::format("model = {}: no such file or model shape; give a TOML file of "
                    "model keys or one of {}",
                    shape, fmt::join(model_shape_names(), ", ")));
  }
  const toml::table table = parse_config_toml(text, source);
  const auto& names = model_config_keys();
  for (const auto& [name, node] : table)
    if (std::find(names.begin(), names.end(), std::string(name.str())) == names.end())
      throw UsageError(
          fmt::format("{}: '{}' is not a model key; a shape holds model keys only "
                      "({}); a recipe in train/ holds the rest",
                      source, name.str(), fmt::join(names, ", ")));
  return table;
}

}  // namespace recall
