// Export of a trained model for PyTorch: the parameters as a state dict that Python's torch.load
// reads with its defaults (torch.save's zip format, a dict of name -> tensor), the same tensors as
// safetensors, and the model's configuration as JSON. python/recall_model.py builds the same
// architecture in PyTorch and loads either.
//   DIR/model.pt           {"tok_emb.weight": (vocab, D), "blocks.0.attn.qkv.weight": (3D, D), ...}
//   DIR/model.safetensors  the same tensors under the same names
//   DIR/config.json  {"model": {...ModelConfig keys...}, "task": ..., "step": ..., ...}
// A model of GPT-2's architecture can also be written as a GPT-2-format folder, which transformers'
// GPT2LMHeadModel.from_pretrained loads (and recall import reads back):
//   DIR/config.json        GPT2Config's keys
//   DIR/model.safetensors  GPT-2's names and layouts (recall/train/gpt2_names.h), float32
//   DIR/vocabulary.json    a text run's {"text_units": ..., "vocabulary": [...]} (id -> unit)
// and a model of the Llama families' architecture (RoPE, RMSNorm, SwiGLU) as a folder of
// LlamaForCausalLM, Qwen2ForCausalLM or Qwen3ForCausalLM, the same files under their names
// (recall/train/llama_names.h).
#pragma once
#include <string>

#include "recall/core/torch.h"
#include "recall/formats/safetensors.h"
#include "recall/formats/torch_save.h"
#include "recall/models/transformer.h"
#include "recall/train/foreign_config.h"
#include "recall/train/train_config.h"

namespace recall {

enum class ExportFormat { kRecall, kGpt2, kLlama, kQwen2, kQwen3 };
std::string to_string(ExportFormat v);
// Throws std::invalid_argument naming the value and the accepted names.
ExportFormat export_format_from_string(const std::string& s);

// Every parameter and buffer of `module` under its dotted name (CPU copies), but the attention's
// head_mask (inspection state, all ones in a trained model).
NamedTensors named_state(const torch::nn::Module& module);
// state_dict_pickle(named_state(module)) (recall/formats/torch_save.h).
std::string state_dict_pickle(const torch::nn::Module& module);

// Writes DIR/model.pt, DIR/model.safetensors and DIR/config.json (the ModelConfig keys under
// "model", enum values by name, norm_eps and rope_base among them) for
// `model` (trained on `config` for `step` steps; text runs carry their vocabulary, id -> byte or
// codepoint). Creates DIR.
void export_model(const Transformer& model, const TrainConfig& config, int64_t step,
                  const std::vector<int64_t>& vocabulary, const std::string& out_dir);

// Writes DIR/config.json and DIR/model.safetensors of GPT-2's format for `model` (and a text run's
// vocabulary.json); a model of another architecture is refused with UsageError naming the key
// (gpt2_json_from_model_config), before DIR is made.
void export_gpt2(const Transformer& model, const TrainConfig& config,
                 const std::vector<int64_t>& vocabulary, const std::string& out_dir);

// The family of a format llama, qwen2 or qwen3.
LlamaFamily llama_family(ExportFormat format);

// Writes DIR/config.json and DIR/model.safetensors of `family`'s format for `model` (and a text
// run's vocabulary.json); a model the family cannot express is refused with UsageError naming the
// key (llama_json_from_model_config), before DIR is made.
void export_llama(const Transformer& model, LlamaFamily family, const TrainConfig& config,
                  const std::vector<int64_t>& vocabulary, const std::string& out_dir);

// export_model, export_gpt2 or export_llama of the checkpoint at `checkpoint` (a file or a run
// folder).
void export_checkpoint(const std::string& checkpoint, const std::string& out_dir,
                       ExportFormat format = ExportFormat::kRecall);

}  // namespace recall
