#include "recall/train/foreign_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <set>

#include "recall/core/enum_names.h"
#include "recall/core/error.h"
#include "recall/models/norm.h"

namespace recall {
namespace {

// The shape every import shares: learned positions, pre-norm LayerNorm, a GELU MLP of 4 d_model
// unless told otherwise, attention scaled by 1 / sqrt(d_head) under no beta rule.
ModelConfig gpt_shape() {
  ModelConfig c;
  c.pos = PosKind::kLearned;
  c.norm = NormKind::kLayerNorm;
  c.ffn = FfnKind::kMlp;
  c.activation = Activation::kGelu;
  c.ffn_mult = 4;
  c.attn_rule = BetaRule::kNone;
  c.attn_scale = 1.0;
  c.tied_head = true;
  c.bias = true;
  return c;
}

void validate(const ModelConfig& c, const std::string& source) {
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{}: {}; it is refused", source, e.what()));
  }
}

// Keys that do not change the forward pass of the language model: dropouts (evaluation applies
// none), token ids, generation defaults, the sequence-classification head (summary_*) and
// bookkeeping. The dtype transformers loads the weights in (torch_dtype up to 4.x, dtype from 5)
// is one: each tensor of the file has its own, widened to float32 on import.
const std::set<std::string>& gpt2_ignored_keys() {
  static const std::set<std::string> keys = {"architectures",
                                             "attn_pdrop",
                                             "embd_pdrop",
                                             "resid_pdrop",
                                             "summary_activation",
                                             "summary_first_dropout",
                                             "summary_proj_to_labels",
                                             "summary_type",
                                             "summary_use_proj",
                                             "bos_token_id",
                                             "eos_token_id",
                                             "pad_token_id",
                                             "sep_token_id",
                                             "decoder_start_token_id",
                                             "initializer_range",
                                             "task_specific_params",
                                             "transformers_version",
                                             "torch_dtype",
                                             "dtype",
                                             "use_cache",
                                             "_name_or_path",
                                             "id2label",
                                             "label2id",
                                             "n_ctx",
                                             "reorder_and_upcast_attn",
                                             "return_dict",
                                             "output_hidden_states",
                                             "output_attentions",
                                             "torchscript",
                                             "use_bfloat16",
                                             "tokenizer_class",
                                             "prefix",
                                             "problem_type",
                                             "finetuning_task",
                                             "max_length",
                                             "min_length",
                                             "do_sample",
                                             "early_stopping",
                                             "num_beams",
                                             "num_beam_groups",
                                             "diversity_penalty",
                                             "temperature",
                                             "top_k",
                                             "top_p",
                                             "typical_p",
                                             "repetition_penalty",
                                             "length_penalty",
                                             "no_repeat_ngram_size",
                                             "encoder_no_repeat_ngram_size",
                                             "bad_words_ids",
                                             "num_return_sequences",
                                             "output_scores",
                                             "return_dict_in_generate",
                                             "forced_bos_token_id",
                                             "forced_eos_token_id",
                                             "remove_invalid_values",
                                             "exponential_decay_length_penalty",
                                             "suppress_tokens",
                                             "begin_suppress_tokens",
                                             "chunk_size_feed_forward",
                                             "tf_legacy_loss",
                                             "_attn_implementation",
                                             "n_special",
                                             "predict_special_tokens",
                                             "gradient_checkpointing"};
  return keys;
}

// Keys whose every value but one changes the architecture: that one is accepted.
const std::map<std::string, nlohmann::json>& gpt2_fixed_keys() {
  static const std::map<std::string, nlohmann::json> keys = {
      {"model_type", "gpt2"},
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"add_cross_attention", false},
      {"is_encoder_decoder", false},
      {"is_decoder", false},
      {"tie_encoder_decoder", false},
      {"pruned_heads", nlohmann::json::object()}};
  return keys;
}

UsageError config_refused(const std::string& source, const std::string& why) {
  return UsageError(fmt::format("{}: {}; it is refused", source, why));
}

// The keys of a GPT-2 config.json that set a field of `c` other than the sizes (MLP width,
// activation, tied head) or must hold recall's value (the LayerNorm epsilon); false for any other
// key. `c` holds the sizes already.
bool read_gpt2_option(const std::string& key, const nlohmann::json& v, ModelConfig& c,
                      const std::string& source) {
  if (key == "n_inner") {
    if (!v.is_null()) {
      if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() % c.d_model != 0)
        throw config_refused(
            source, fmt::format("n_inner = {}: recall's MLP width is a multiple of n_embd = {}",
                                v.dump(), c.d_model));
      c.ffn_mult = v.get<int64_t>() / c.d_model;
    }
  } else if (key == "activation_function") {
    const std::string a = v.is_string() ? v.get<std::string>() : v.dump();
    if (a == "gelu")
      c.activation = Activation::kGelu;
    else if (a == "gelu_new" || a == "gelu_pytorch_tanh")
      c.activation = Activation::kGeluTanh;
    else
      throw config_refused(source,
                           fmt::format("activation_function = {}: recall has gelu (exact) and "
                                       "gelu_new / gelu_pytorch_tanh (its gelu_tanh)",
                                       a));
  } else if (key == "layer_norm_epsilon") {
    if (!v.is_number() || v.get<double>() != kNormEps)
      throw config_refused(
          source, fmt::format("layer_norm_epsilon = {}: recall's LayerNorm uses 1e-05", v.dump()));
  } else if (key == "tie_word_embeddings") {
    if (!v.is_boolean()) throw config_refused(source, "tie_word_embeddings is not true or false");
    c.tied_head = v.get<bool>();
  } else {
    return false;
  }
  return true;
}

constexpr std::array<const char*, 3> kLlamaFamilyNames = {"llama", "qwen2", "qwen3"};

// The shape of the Llama families: RoPE, pre-norm RMSNorm, a SwiGLU feed-forward, no biases, an
// untied head, attention scaled by 1 / sqrt(d_head) under no beta rule.
ModelConfig llama_shape() {
  ModelConfig c;
  c.pos = PosKind::kRope;
  c.norm = NormKind::kRmsNorm;
  c.ffn = FfnKind::kGlu;
  c.activation = Activation::kSilu;
  c.attn_rule = BetaRule::kNone;
  c.attn_scale = 1.0;
  c.tied_head = false;
  c.bias = false;
  return c;
}

// The widths in one form, so that a model read from a file and the model written to it compare
// equal: n_kv_heads and d_head 0 where they are the default, the feed-forward width as ffn_mult
// where it is a multiple of d_model (else ffn_mult at its default, which intermediate_size
// overrides), qkv_bias off where bias puts biases everywhere.
void normalise_widths(ModelConfig& c) {
  if (c.n_kv_heads == c.n_heads) c.n_kv_heads = 0;
  if (c.d_head > 0 && c.n_heads > 0 && c.d_model % c.n_heads == 0 &&
      c.d_head == c.d_model / c.n_heads)
    c.d_head = 0;
  if (c.intermediate_size > 0 && c.intermediate_size % c.d_model == 0 &&
      c.intermediate_size / c.d_model <= 64) {
    c.ffn_mult = c.intermediate_size / c.d_model;
    c.intermediate_size = 0;
  } else if (c.intermediate_size > 0) {
    c.ffn_mult = ModelConfig{}.ffn_mult;  // the width is intermediate_size's alone
  }
  if (c.bias) c.qkv_bias = false;
}

// Keys of the Llama families that leave the forward pass as recall computes it: the attention's
// dropout, Llama 4.x's tensor-parallel slicing of the same products, and where Qwen's sliding
// windows would start (use_sliding_window, refused when true, decides whether there are any).
const std::set<std::string>& llama_ignored_keys() {
  static const std::set<std::string> keys = {"attention_dropout", "pretraining_tp",
                                             "max_window_layers"};
  return keys;
}

// Keys of the mixture-of-experts variants (Mixtral, Qwen2-MoE, Qwen3-MoE, DeepSeek): recall's
// feed-forward is one dense store.
const std::set<std::string>& moe_keys() {
  static const std::set<std::string> keys = {"num_experts",
                                             "num_local_experts",
                                             "num_experts_per_tok",
                                             "moe_intermediate_size",
                                             "shared_expert_intermediate_size",
                                             "decoder_sparse_step",
                                             "norm_topk_prob",
                                             "output_router_logits",
                                             "router_aux_loss_coef",
                                             "router_jitter_noise",
                                             "mlp_only_layers",
                                             "n_routed_experts",
                                             "n_shared_experts",
                                             "first_k_dense_replace"};
  return keys;
}

// rope_theta as a RoPE base recall holds, refused otherwise.
double rope_theta(const nlohmann::json& v, const std::string& key, const std::string& source) {
  if (!v.is_number() || !(v.get<double>() > 1))
    throw config_refused(
        source, fmt::format("{} = {}: RoPE's base must be a number above 1", key, v.dump()));
  return v.get<double>();
}

// rope_parameters (transformers 5) or rope_scaling (4.x): recall's RoPE is the unscaled one,
// rope_type default with its theta; any scaling (linear, dynamic, yarn, llama3, longrope...) or a
// partial rotation is refused.
void read_rope_object(const std::string& key, const nlohmann::json& v, ModelConfig& c,
                      const std::string& source) {
  if (v.is_null()) return;
  if (!v.is_object())
    throw config_refused(source, fmt::format("{} = {}: not an object", key, v.dump()));
  for (const char* type : {"rope_type", "type"})
    if (v.contains(type) && v[type] != "default")
      throw config_refused(source,
                           fmt::format("{} has {} = {}: recall's RoPE is unscaled (rope_type "
                                       "default), no RoPE scaling is implemented",
                                       key, type, v[type].dump()));
  for (const auto& [k, x] : v.items()) {
    if ((k == "rope_type" || k == "type") && x == "default") continue;
    if (k == "rope_theta") {
      c.rope_base = rope_theta(x, key + ".rope_theta", source);
    } else if (k == "partial_rotary_factor" && x.is_number() && x.get<double>() == 1.0) {
      continue;
    } else {
      throw config_refused(
          source, fmt::format("{} holds {} = {}: recall's RoPE is unscaled and rotates every "
                              "channel (rope_type default), no RoPE scaling is implemented",
                              key, k, x.dump()));
    }
  }
}

// A size key of the Llama families: a positive integer.
int64_t positive_int(const nlohmann::json& v, const std::string& key, const std::string& source) {
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    throw config_refused(source, fmt::format("{} = {}: must be a positive integer", key, v.dump()));
  return v.get<int64_t>();
}

bool boolean(const nlohmann::json& v, const std::string& key, const std::string& source) {
  if (!v.is_boolean()) throw config_refused(source, fmt::format("{} is not true or false", key));
  return v.get<bool>();
}

}  // namespace

ModelConfig model_config_from_nanogpt(const PickleValue& args, const std::string& source) {
  auto refuse = [&](const std::string& why) {
    return UsageError(fmt::format("{}: model_args {}; it is refused", source, why));
  };
  if (args.kind != PickleValue::Kind::kDict) throw refuse("is not a dict");
  ModelConfig c = gpt_shape();
  const std::pair<const char*, int64_t*> ints[] = {{"n_layer", &c.n_layers},
                                                   {"n_head", &c.n_heads},
                                                   {"n_embd", &c.d_model},
                                                   {"block_size", &c.seq_len},
                                                   {"vocab_size", &c.vocab_size}};
  for (const auto& [key, v] : args.entries) {
    if (key->kind != PickleValue::Kind::kString) throw refuse("has a key that is not a string");
    const std::string& k = key->s;
    bool known = k == "bias" || k == "dropout";
    for (const auto& [name, field] : ints)
      if (k == name) {
        if (v->kind != PickleValue::Kind::kInt)
          throw refuse(fmt::format("{} is a {}, not an int", k, v->describe()));
        *field = v->i;
        known = true;
      }
    if (!known)
      throw refuse(
          fmt::format("holds {}, an architecture key recall does not know (nanoGPT's are "
                      "n_layer, n_head, n_embd, block_size, bias, vocab_size, dropout)",
                      k));
  }
  for (const char* k : {"n_layer", "n_head", "n_embd", "block_size", "vocab_size", "bias"})
    if (!args.get(k)) throw refuse(fmt::format("lacks {}", k));
  const PickleValue* bias = args.get("bias");
  if (bias->kind != PickleValue::Kind::kBool)
    throw refuse(fmt::format("bias is a {}, not True or False", bias->describe()));
  c.bias = bias->i != 0;
  validate(c, source);
  return c;
}

ModelConfig model_config_from_gpt2_json(const std::string& text, const std::string& source) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw config_refused(source, "is not a JSON object");
  ModelConfig c = gpt_shape();
  const std::pair<const char*, int64_t*> ints[] = {{"n_layer", &c.n_layers},
                                                   {"n_head", &c.n_heads},
                                                   {"n_embd", &c.d_model},
                                                   {"n_positions", &c.seq_len},
                                                   {"vocab_size", &c.vocab_size}};
  for (const auto& [key, field] : ints) {
    if (!j.contains(key)) throw config_refused(source, fmt::format("lacks {}", key));
    if (!j[key].is_number_integer())
      throw config_refused(source, fmt::format("{} is not an integer", key));
    *field = j[key].get<int64_t>();
  }
  const auto& fixed = gpt2_fixed_keys();
  for (const auto& [key, v] : j.items()) {
    bool known = gpt2_ignored_keys().count(key) > 0;
    for (const auto& [name, field] : ints) known |= key == name;
    if (auto it = fixed.find(key); it != fixed.end()) {
      if (v != it->second && !(v.is_null() && key == "pruned_heads"))
        throw config_refused(source, fmt::format("{} = {}: recall's model needs {}", key, v.dump(),
                                                 it->second.dump()));
      known = true;
    }
    known |= read_gpt2_option(key, v, c, source);
    if (!known)
      throw config_refused(source,
                           fmt::format("holds {}, an architecture key recall does not know", key));
  }
  validate(c, source);
  return c;
}

nlohmann::json gpt2_json_from_model_config(const ModelConfig& c, const std::string& flag) {
  nlohmann::json j = {
      {"model_type", "gpt2"},
      {"architectures", {"GPT2LMHeadModel"}},
      {"vocab_size", c.vocab_size},
      {"n_positions", c.seq_len},
      {"n_embd", c.d_model},
      {"n_layer", c.n_layers},
      {"n_head", c.n_heads},
      {"n_inner", c.ffn_mult * c.d_model},
      {"activation_function", c.activation == Activation::kGeluTanh ? "gelu_new" : "gelu"},
      {"layer_norm_epsilon", kNormEps},
      {"tie_word_embeddings", c.tied_head},
      {"scale_attn_weights", true},
      // GPT-2's 50256 is no token of a smaller vocabulary
      {"bos_token_id", nullptr},
      {"eos_token_id", nullptr}};
  // The reader decides what GPT-2 holds: every key it gives back must be the model's own.
  ModelConfig gpt2 = model_config_from_gpt2_json(j.dump(), flag);
  if (c.ffn == FfnKind::kMlp) gpt2.ffn_slots = c.ffn_slots;  // learned_kv's alone, not the MLP's
  const auto want = model_config_items(c), got = model_config_items(gpt2);
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != got[i])
      throw UsageError(fmt::format(
          "{}: the model has {} = {}, a GPT-2 model (transformers' GPT2LMHeadModel) has {} = {}; "
          "export it without --format gpt2 (python/recall_model.py loads every recall model)",
          flag, want[i].first, want[i].second, got[i].first, got[i].second));
  return j;
}

std::string to_string(LlamaFamily v) {
  return enum_name(kLlamaFamilyNames, v);
}
LlamaFamily llama_family_from_string(const std::string& s) {
  return enum_from_name<LlamaFamily>(kLlamaFamilyNames, s, "model_type");
}

std::string llama_architecture(LlamaFamily f) {
  switch (f) {
    case LlamaFamily::kLlama:
      return "LlamaForCausalLM";
    case LlamaFamily::kQwen2:
      return "Qwen2ForCausalLM";
    case LlamaFamily::kQwen3:
      return "Qwen3ForCausalLM";
  }
  throw std::logic_error("llama_architecture");
}

std::string foreign_model_type(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("model_type") ||
      !j["model_type"].is_string())
    return "";
  return j["model_type"].get<std::string>();
}

namespace {

// Qwen's sliding-window keys: recall reads them only where every layer sees every earlier position.
bool is_window_key(const std::string& key) {
  return key == "use_sliding_window" || key == "sliding_window" || key == "layer_types";
}
void check_full_attention(const std::string& key, const nlohmann::json& v,
                          const std::string& source) {
  if (key == "use_sliding_window") {
    if (boolean(v, key, source))
      throw config_refused(source,
                           "use_sliding_window = true: recall's attention sees every earlier "
                           "position, there is no sliding window");
  } else if (key == "sliding_window") {
    // used only with use_sliding_window, refused above
    if (!v.is_null() && !v.is_number_integer())
      throw config_refused(source, fmt::format("sliding_window = {}: not an integer", v.dump()));
  } else {  // layer_types
    if (!v.is_array())
      throw config_refused(source, fmt::format("layer_types = {}: not a list", v.dump()));
    for (const auto& t : v)
      if (t != "full_attention")
        throw config_refused(source, fmt::format("layer_types holds {}: recall's layers are all "
                                                 "full_attention",
                                                 t.dump()));
  }
}

// recall's biases are on every linear map (bias) or on q, k and v alone (qkv_bias, Qwen2's).
void check_biases(bool attention_bias, bool mlp_bias, LlamaFamily f, const std::string& source) {
  if (attention_bias == mlp_bias) return;
  if (f == LlamaFamily::kQwen3)
    throw config_refused(source,
                         "attention_bias = true: recall's biases on q, k, v and the output "
                         "map come with the feed-forward's, which Qwen3 has not");
  throw config_refused(source,
                       fmt::format("{} = true without {}: recall's biases are on every linear map "
                                   "(bias) or on q, k and v alone (qkv_bias)",
                                   attention_bias ? "attention_bias" : "mlp_bias",
                                   attention_bias ? "mlp_bias" : "attention_bias"));
}

}  // namespace

ModelConfig model_config_from_llama_json(const std::string& text, const std::string& source) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw config_refused(source, "is not a JSON object");
  const std::string type = foreign_model_type(text);
  LlamaFamily f;
  try {
    f = llama_family_from_string(type);
  } catch (const std::invalid_argument& e) {
    throw config_refused(source, e.what());
  }
  ModelConfig c = llama_shape();
  const std::pair<const char*, int64_t*> sizes[] = {
      {"vocab_size", &c.vocab_size},           {"hidden_size", &c.d_model},
      {"num_hidden_layers", &c.n_layers},      {"num_attention_heads", &c.n_heads},
      {"max_position_embeddings", &c.seq_len}, {"intermediate_size", &c.intermediate_size}};
  for (const auto& [key, field] : sizes) {
    if (!j.contains(key)) throw config_refused(source, fmt::format("lacks {}", key));
    *field = positive_int(j[key], key, source);
  }
  // transformers' defaults where the file has no value: Llama's kv heads are its heads and its
  // head width d_model / n_heads; Qwen2's and Qwen3's classes default to 32 kv heads, Qwen3's
  // head_dim to 128, and every family's rms_norm_eps to 1e-6
  c.n_kv_heads = f == LlamaFamily::kLlama ? c.n_heads : 32;
  c.d_head = f == LlamaFamily::kQwen3 ? 128 : 0;
  c.norm_eps = 1e-6;
  c.qkv_bias = f == LlamaFamily::kQwen2;  // Qwen2's q, k and v have biases, its output map none
  c.attn_qk_rmsnorm = f == LlamaFamily::kQwen3;
  bool attention_bias = false, mlp_bias = false;
  const bool qwen = f != LlamaFamily::kLlama;
  for (const auto& [key, v] : j.items()) {
    bool size = false;  // a loop, not a lambda: C++17 lambdas capture no structured binding
    for (const auto& entry : sizes) size |= key == entry.first;
    if (size || key == "model_type" || gpt2_ignored_keys().count(key) ||
        llama_ignored_keys().count(key))
      continue;
    if (moe_keys().count(key))
      throw config_refused(source, fmt::format("holds {}, a mixture-of-experts key: recall's "
                                               "feed-forward is one dense SwiGLU",
                                               key));
    if (key == "num_key_value_heads") {
      c.n_kv_heads = v.is_null() ? c.n_heads : positive_int(v, key, source);
    } else if (key == "head_dim") {
      c.d_head = v.is_null() ? 0 : positive_int(v, key, source);
    } else if (key == "hidden_act") {
      if (v != "silu")
        throw config_refused(source, fmt::format("hidden_act = {}: recall reads the SwiGLU "
                                                 "feed-forward (silu) of these models",
                                                 v.dump()));
    } else if (key == "rms_norm_eps") {
      if (!v.is_number() || !(v.get<double>() > 0))
        throw config_refused(source,
                             fmt::format("rms_norm_eps = {}: must be a positive number", v.dump()));
      c.norm_eps = v.get<double>();
    } else if (key == "tie_word_embeddings") {
      c.tied_head = boolean(v, key, source);
    } else if (key == "rope_theta") {
      c.rope_base = rope_theta(v, key, source);
    } else if (key == "rope_parameters" || key == "rope_scaling") {
      read_rope_object(key, v, c, source);
    } else if (key == "partial_rotary_factor") {
      if (!v.is_number() || v.get<double>() != 1.0)
        throw config_refused(source,
                             fmt::format("partial_rotary_factor = {}: recall's RoPE rotates "
                                         "every channel of a head",
                                         v.dump()));
    } else if (key == "attention_bias" && f != LlamaFamily::kQwen2) {
      attention_bias = boolean(v, key, source);
    } else if (key == "mlp_bias" && f == LlamaFamily::kLlama) {
      mlp_bias = boolean(v, key, source);
    } else if (qwen && is_window_key(key)) {
      check_full_attention(key, v, source);
    } else {
      throw config_refused(source,
                           fmt::format("holds {}, a key recall does not know for model_type {} "
                                       "(remove it if it leaves the model as it is)",
                                       key, type));
    }
  }
  check_biases(attention_bias, mlp_bias, f, source);
  c.bias = attention_bias && mlp_bias;
  if (c.n_heads % c.n_kv_heads != 0)
    throw config_refused(source, fmt::format("num_attention_heads = {} is not a multiple of "
                                             "num_key_value_heads = {}",
                                             c.n_heads, c.n_kv_heads));
  normalise_widths(c);
  validate(c, source);
  return c;
}

nlohmann::json llama_json_from_model_config(const ModelConfig& model, LlamaFamily f,
                                            const std::string& flag) {
  ModelConfig c = model;
  normalise_widths(c);
  const int64_t width = c.intermediate_size > 0 ? c.intermediate_size : c.ffn_mult * c.d_model;
  nlohmann::json j = {{"model_type", to_string(f)},
                      {"architectures", {llama_architecture(f)}},
                      {"vocab_size", c.vocab_size},
                      {"hidden_size", c.d_model},
                      {"intermediate_size", width},
                      {"num_hidden_layers", c.n_layers},
                      {"num_attention_heads", c.n_heads},
                      {"num_key_value_heads", c.kv_heads()},
                      {"head_dim", c.head_dim()},
                      {"hidden_act", "silu"},
                      {"max_position_embeddings", c.seq_len},
                      {"rms_norm_eps", c.norm_eps},
                      {"rope_theta", c.rope_base},
                      {"tie_word_embeddings", c.tied_head},
                      {"bos_token_id", nullptr},
                      {"eos_token_id", nullptr}};
  if (f == LlamaFamily::kLlama) {
    j["attention_bias"] = c.bias;
    j["mlp_bias"] = c.bias;
  } else {
    if (f == LlamaFamily::kQwen3) j["attention_bias"] = false;
    j["use_sliding_window"] = false;
  }
  const std::string name = llama_architecture(f);
  // The reader decides what the family holds: every key it gives back must be the model's own.
  ModelConfig back = model_config_from_llama_json(j.dump(), flag);
  if (c.ffn == FfnKind::kGlu) back.ffn_slots = c.ffn_slots;  // learned_kv's alone
  const auto want = model_config_items(c), got = model_config_items(back);
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != got[i])
      throw UsageError(fmt::format(
          "{}: the model has {} = {}, a {} model (transformers' {}) has {} = {}; export it "
          "without --format (python/recall_model.py loads every recall model)",
          flag, want[i].first, want[i].second, to_string(f), name, got[i].first, got[i].second));
  // transformers' LlamaConfig refuses heads that do not divide hidden_size, head_dim or not
  if (f == LlamaFamily::kLlama && c.d_model % c.n_heads != 0)
    throw UsageError(fmt::format(
        "{}: the model has d_model = {} and n_heads = {}; transformers' LlamaConfig needs "
        "d_model divisible by n_heads (even with d_head set): try --format qwen2 or qwen3",
        flag, c.d_model, c.n_heads));
  return j;
}

}  // namespace recall
