#include "recall/models/foreign_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

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

UsageError refused(const std::string& source, const std::string& why) {
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
        throw refused(source,
                      fmt::format("n_inner = {}: recall's MLP width is a multiple of n_embd = {}",
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
      throw refused(source, fmt::format("activation_function = {}: recall has gelu (exact) and "
                                        "gelu_new / gelu_pytorch_tanh (its gelu_tanh)",
                                        a));
  } else if (key == "layer_norm_epsilon") {
    if (!v.is_number() || v.get<double>() != kNormEps)
      throw refused(
          source, fmt::format("layer_norm_epsilon = {}: recall's LayerNorm uses 1e-05", v.dump()));
  } else if (key == "tie_word_embeddings") {
    if (!v.is_boolean()) throw refused(source, "tie_word_embeddings is not true or false");
    c.tied_head = v.get<bool>();
  } else {
    return false;
  }
  return true;
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
  if (j.is_discarded() || !j.is_object()) throw refused(source, "is not a JSON object");
  ModelConfig c = gpt_shape();
  const std::pair<const char*, int64_t*> ints[] = {{"n_layer", &c.n_layers},
                                                   {"n_head", &c.n_heads},
                                                   {"n_embd", &c.d_model},
                                                   {"n_positions", &c.seq_len},
                                                   {"vocab_size", &c.vocab_size}};
  for (const auto& [key, field] : ints) {
    if (!j.contains(key)) throw refused(source, fmt::format("lacks {}", key));
    if (!j[key].is_number_integer())
      throw refused(source, fmt::format("{} is not an integer", key));
    *field = j[key].get<int64_t>();
  }
  const auto& fixed = gpt2_fixed_keys();
  for (const auto& [key, v] : j.items()) {
    bool known = gpt2_ignored_keys().count(key) > 0;
    for (const auto& [name, field] : ints) known |= key == name;
    if (auto it = fixed.find(key); it != fixed.end()) {
      if (v != it->second && !(v.is_null() && key == "pruned_heads"))
        throw refused(source, fmt::format("{} = {}: recall's model needs {}", key, v.dump(),
                                          it->second.dump()));
      known = true;
    }
    known |= read_gpt2_option(key, v, c, source);
    if (!known)
      throw refused(source, fmt::format("holds {}, an architecture key recall does not know", key));
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

}  // namespace recall
