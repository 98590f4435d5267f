// The model's configuration and everything about it: its fields, its TOML keys with their types
// and bounds, the reader, the writer, and the model shapes of models/ (`models/<shape>.toml`: the
// shape's model keys only, compiled in, so `model = "tiny-attn"` works from any folder). Training
// recipes (train layer) name a shape and add their own keys; they read and print the model keys
// through this header only.
#pragma once
#include <toml++/toml.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recall/ops/layer_norm.h"
#include "recall/stores/activation.h"
#include "recall/stores/beta_rule.h"
#include "recall/stores/feed_forward.h"
#include "recall/stores/rope.h"

namespace recall {

enum class PosKind { kRope, kLearned, kNone };
enum class NormKind { kRmsNorm, kLayerNorm };

std::string to_string(PosKind v);
std::string to_string(NormKind v);
// Each throws std::invalid_argument naming the value and the accepted names.
PosKind pos_kind_from_string(const std::string& s);
NormKind norm_kind_from_string(const std::string& s);

// Flat, typed model configuration. validate() throws std::invalid_argument naming the key, value
// and accepted range (e.g. "d_model = 130 is not divisible by n_heads = 4").
struct ModelConfig {
  int64_t vocab_size = 96;
  int64_t d_model = 128;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t seq_len = 256;  // training length: L of the beta rules, size of learned positions
  PosKind pos = PosKind::kRope;
  NormKind norm = NormKind::kRmsNorm;
  bool tied_head = false;
  bool bias = false;  // biases in linear layers (the nanoGPT-style peer uses them)
  BetaRule attn_rule = BetaRule::kNone;
  FfnKind ffn = FfnKind::kMlp;                // TOML also accepts "swiglu": glu with silu
  Activation activation = Activation::kGelu;  // the mlp's activation or the glu's gate
  int64_t ffn_mult = 4;     // hidden width = ffn_mult * d_model (linear, mlp, glu)
  int64_t ffn_slots = 0;    // learned_kv: number of learned key/value slots per head
  int64_t attn_mem_kv = 0;  // learned key/values concatenated to the context keys
  // The attention logit multiplier relative to the standard 1 / sqrt(d_head) (the sharpness beta in
  // units of the standard one); the beta rules multiply it. With attn_qk_norm, beta itself.
  double attn_scale = 1.0;
  // Width of the causal depthwise convolution of q, k, v (attention.h); 0: none. With pos = none it
  // lets recall depend on content alone, so that only the number of memories changes with length.
  int64_t attn_conv = 0;
  // Unit queries and keys per head (attention.h): the logit is beta cos(q, k) with beta =
  // attn_scale times the rule's factor, the essay's softmax store with its sharpness stated.
  bool attn_qk_norm = false;
  // attn_scale learned per head from its value (`attn.beta`), rather than fixed.
  bool attn_scale_learned = false;
  // The keys of the Llama and Qwen families (recall import and export --format llama|qwen2|qwen3);
  // each default is the model as it was before the key, so older configs read as they did.
  double rope_base =
      kRopeBase;  // RoPE's base: frequencies base^(-2i / d_head) (Llama's rope_theta)
  // Grouped-query attention: G key/value heads, each shared by n_heads / G query heads in turn
  // (head h reads kv head h / (n_heads / G), as transformers' repeat_kv); 0: n_heads (MHA).
  int64_t n_kv_heads = 0;
  int64_t d_head = 0;          // each head's width, apart from d_model; 0: d_model / n_heads
  double norm_eps = kNormEps;  // the eps of every norm (rms_norm_eps, layer_norm_epsilon)
  bool qkv_bias = false;       // biases on the q, k, v projections alone (Qwen2); `bias` sets all
  // Qwen3's RMSNorm of each head's query and key with learned gains g_q, g_k (d_head,), before
  // RoPE (attention.h): the essay's unit keys up to those gains.
  bool attn_qk_rmsnorm = false;
  // The feed-forward width (linear, mlp, glu); 0: ffn_mult * d_model.
  int64_t intermediate_size = 0;
  // Every key's bounds, then the checks across keys.
  void validate() const;
  int64_t head_dim() const { return d_head > 0 ? d_head : d_model / n_heads; }
  int64_t kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
};

// The TOML keys of ModelConfig, equal to its field names, in the order the writer prints them.
const std::vector<std::string>& model_config_keys();

// (key, TOML literal) for every model key, in model_config_keys() order: what a run's config.toml
// and a checkpoint hold, and what resuming compares.
std::vector<std::pair<std::string, std::string>> model_config_items(const ModelConfig& config);

// Reads the model keys present in `table` over `base` (by default ModelConfig's defaults) and
// validates the result. Keys that are not model keys are ignored (the caller owns them). Throws
// std::invalid_argument naming the key on a wrong type or value.
ModelConfig model_config_from_toml(const toml::table& table, const ModelConfig& base = {});

// The shapes of models/, by file name without .toml: the TOML text, or nullopt.
std::optional<std::string_view> model_shape_toml(const std::string& name);
std::vector<std::string> model_shape_names();

// The model keys of the shape `shape`: a file (relative to `base_dir`) if one is there, else the
// compiled-in shape of that name. A key that is not a model key is refused: shapes hold the model
// only. Throws UsageError naming the shape and what is accepted.
toml::table read_model_shape(const std::string& shape, const std::string& base_dir = ".");

}  // namespace recall
