// The ModelConfig of a model trained elsewhere, derived from its own configuration: nanoGPT's
// model_args and a GPT-2-format config.json. Both are recall's learned-position, LayerNorm,
// GELU-MLP architecture; a key recall does not know or a value it cannot represent exactly (dropout
// aside, which evaluation does not apply) is refused with UsageError naming it, never approximated.
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

}  // namespace recall
