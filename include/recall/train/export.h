// Export of a trained model for PyTorch: the parameters as a state dict that Python's torch.load
// reads with its defaults (torch.save's zip format, a dict of name -> tensor), the same tensors as
// safetensors, and the model's configuration as JSON. python/recall_model.py builds the same
// architecture in PyTorch and loads either.
//   DIR/model.pt           {"tok_emb.weight": (vocab, D), "blocks.0.attn.qkv.weight": (3D, D), ...}
//   DIR/model.safetensors  the same tensors under the same names
//   DIR/config.json  {"model": {...ModelConfig keys...}, "task": ..., "step": ..., ...}
#pragma once
#include <string>

#include "recall/core/safetensors.h"
#include "recall/core/torch.h"
#include "recall/models/transformer.h"
#include "recall/train/train_config.h"

namespace recall {

// Every parameter and buffer of `module` under its dotted name (CPU copies), but the attention's
// head_mask (inspection state, all ones in a trained model).
NamedTensors named_state(const torch::nn::Module& module);
// A torch.save-format zip of the dict name -> tensor: torch.load reads it with its defaults
// (weights_only) under torch 1.13 and every 2.x.
std::string state_dict_pickle(const NamedTensors& tensors);
// `value` (dicts, lists, tuples, strings, numbers, tensors) in torch.save's format, untagged.
std::string torch_save_bytes(const c10::IValue& value);
// state_dict_pickle(named_state(module)).
std::string state_dict_pickle(const torch::nn::Module& module);

// Writes DIR/model.pt, DIR/model.safetensors and DIR/config.json (the ModelConfig keys under
// "model", enum values by name, with the constants the architecture fixes: norm_eps, rope_base) for
// `model` (trained on `config` for `step` steps; text runs carry their vocabulary, id -> byte or
// codepoint). Creates DIR.
void export_model(const Transformer& model, const TrainConfig& config, int64_t step,
                  const std::vector<int64_t>& vocabulary, const std::string& out_dir);

// export_model of the checkpoint at `checkpoint` (a file or a run folder).
void export_checkpoint(const std::string& checkpoint, const std::string& out_dir);

}  // namespace recall
