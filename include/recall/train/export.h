// Export of a trained model for PyTorch: the parameters as a state dict that Python's torch.load
// reads (LibTorch's pickle format, a dict of name -> tensor), and the model's configuration as
// JSON. python/recall_model.py builds the same architecture in PyTorch and loads them.
//   DIR/model.pt     {"tok_emb.weight": (vocab, D), "block0.attn.qkv.weight": (3D, D), ...}
//   DIR/config.json  {"model": {...ModelConfig keys...}, "task": ..., "step": ..., ...}
#pragma once
#include <torch/torch.h>

#include <string>

#include "recall/models/model.h"
#include "recall/train/train_config.h"

namespace recall {

// Every parameter and buffer of `module` under its dotted name, pickled (torch.load reads it).
std::string state_dict_pickle(const torch::nn::Module& module);

// Writes DIR/model.pt and DIR/config.json (the ModelConfig keys under "model", enum values by
// name, with the constants the architecture fixes: norm_eps, rope_base) for `model` (trained on
// `config` for `step` steps; text runs carry their vocabulary, id -> byte or codepoint). Creates
// DIR.
void export_model(const Transformer& model, const TrainConfig& config, int64_t step,
                  const std::vector<int64_t>& vocabulary, const std::string& out_dir);

// export_model of the checkpoint at `checkpoint` (a file or a run folder).
void export_checkpoint(const std::string& checkpoint, const std::string& out_dir);

}  // namespace recall
