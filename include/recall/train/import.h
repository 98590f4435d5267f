// Import of models trained elsewhere into a recall checkpoint that every command takes (eval,
// sample, inspect, extrapolate, export):
//   nanoGPT checkpoint   ckpt.pt: {"model_args": {...}, "model": state dict, "iter_num": ...}
//                        (torch.compile's "_orig_mod." prefixes are stripped)
//   GPT-2-format folder  config.json with model.safetensors (read by the format's rules), its
//                        shards and model.safetensors.index.json, or pytorch_model.bin (a
//                        torch.save state dict)
//   Llama, Qwen2, Qwen3  the same files, config.json's model_type llama, qwen2 or qwen3
// The first two hold recall's learned-position LayerNorm GELU-MLP architecture under GPT-2's names
// (recall/train/gpt2_names.h), the others its RoPE RMSNorm SwiGLU one under transformers' names
// (recall/train/llama_names.h). float16 and bfloat16 tensors are widened to float32
// (exactly). A tensor recall has no place for, a missing or misshapen one, a dtype it cannot hold
// exactly or a weight holding NaN or Inf is refused with UsageError naming it.
#pragma once
#include <map>
#include <string>

#include "recall/formats/safetensors.h"
#include "recall/models/transformer.h"
#include "recall/train/train_config.h"

namespace recall {

struct ForeignModel {
  ModelConfig config;                            // derived from the file
  std::map<std::string, torch::Tensor> tensors;  // the file's names (no prefix) -> float32
  bool conv1d = false;  // linear weights stored (in, out), as GPT-2's Conv1D
  bool llama = false;   // a Llama, Qwen2 or Qwen3 folder (llama_names.h), else GPT-2's names
  int64_t step = 0;     // nanoGPT's iter_num; 0 for a GPT-2 folder
  std::string format;   // what was read, for messages
};

// Reads a nanoGPT checkpoint file or a GPT-2, Llama, Qwen2 or Qwen3 folder.
ForeignModel read_foreign_model(const std::string& path);

// The recall model holding `m`'s weights (every parameter set from the file, shapes checked);
// m.tensors is consumed (empty on return), so a large model is not held twice.
Transformer build_foreign_model(ForeignModel& m);

// Writes OUT/checkpoint.bin and OUT/config.toml for the model at `path`: `config`'s task and
// trainer keys with the model keys of the file (those of `config` are replaced). A text task's
// vocabulary is its corpus's units, whose count must equal the model's vocab_size. Returns what
// was read.
ForeignModel import_model(const std::string& path, TrainConfig config, const std::string& out_dir);

}  // namespace recall
