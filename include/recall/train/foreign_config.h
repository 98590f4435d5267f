// The ModelConfig of a model trained elsewhere, derived from its own configuration: nanoGPT's
// model_args and a GPT-2-format config.json (recall's learned-position, LayerNorm, GELU-MLP
// architecture), and the config.json of transformers' LlamaForCausalLM, Qwen2ForCausalLM and
// Qwen3ForCausalLM (RoPE, RMSNorm, SwiGLU; grouped-query attention, Qwen2's q, k, v biases,
// Qwen3's per-head q and k norms). A key recall does not know or a value it cannot represent
// exactly (dropout aside, which evaluation does not apply) is refused with UsageError naming it,
// never approximated.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "recall/formats/torch_pickle.h"
#include "recall/models/model_config.h"

namespace recall {

// nanoGPT's GPTConfig as its checkpoint's model_args: n_layer, n_head, n_embd, block_size, bias,
// vocab_size, dropout. Its head is tied unless the caller finds lm_head.weight differing from wte
// (tied_head is left true here). `source` names the file in messages.
ModelConfig model_config_from_nanogpt(const PickleValue& model_args, const std::string& source);

// A GPT-2-format (Hugging Face GPT2Config) config.json: n_embd, n_layer, n_head, n_positions,
// vocab_size, n_inner, activation_function (gelu, gelu_new / gelu_pytorch_tanh -> gelu_tanh),
// layer_norm_epsilon (1e-5), tie_word_embeddings; the keys that do not change the forward pass
// (dropouts, token ids, the classification-head summary_* keys, generation defaults, dtype or
// torch_dtype, bookkeeping such as transformers_version: what transformers 4.x and 5.x write) are
// accepted.
ModelConfig model_config_from_gpt2_json(const std::string& json_text, const std::string& source);

// The GPT-2 config.json (GPT2Config's keys, as transformers reads them) of `c`, a model of GPT-2's
// architecture: model_config_from_gpt2_json gives `c` back. Any other model is refused with
// UsageError naming the first model key whose value GPT-2 has no place for (`flag` opens it).
nlohmann::json gpt2_json_from_model_config(const ModelConfig& c, const std::string& flag);

// The Llama-shaped families of transformers that recall reads and writes, by config.json's
// model_type: llama, qwen2, qwen3.
enum class LlamaFamily { kLlama, kQwen2, kQwen3 };
std::string to_string(LlamaFamily v);
// Throws std::invalid_argument naming the value and the accepted names.
LlamaFamily llama_family_from_string(const std::string& s);
// transformers' class of the family: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM.
std::string llama_architecture(LlamaFamily f);

// config.json's model_type, "" when the text is no JSON object or has none (the reader of the
// format it names then says what is wrong).
std::string foreign_model_type(const std::string& json_text);

// The config.json of a Llama, Qwen2 or Qwen3 model (by its model_type), as transformers 4.x and 5.x
// write it: hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
// intermediate_size, max_position_embeddings (seq_len), vocab_size, rms_norm_eps, rope_theta (4.x)
// or rope_parameters (5.x), tie_word_embeddings, Llama's attention_bias and mlp_bias (both or
// neither), hidden_act silu. Refused, naming the key: RoPE scaling of any kind, sliding windows,
// mixture-of-experts keys, layers of another attention type, any other activation, and any key
// recall does not know.
ModelConfig model_config_from_llama_json(const std::string& json_text, const std::string& source);

// The config.json of family `f` for `c`: model_config_from_llama_json gives `c` back (in the
// normal form of its widths: n_kv_heads and d_head 0 where they equal the default, the
// feed-forward width as ffn_mult where it is a multiple of d_model). Any model the family cannot
// express is refused with UsageError naming the first model key that differs (`flag` opens it).
nlohmann::json llama_json_from_model_config(const ModelConfig& c, LlamaFamily f,
                                            const std::string& flag);

}  // namespace recall
