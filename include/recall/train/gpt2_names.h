// GPT-2's tensor names for recall's parameters, read by import (a GPT-2-format folder or a nanoGPT
// checkpoint into recall) and written by export (recall into a folder transformers loads): one
// table, so the two directions cannot drift apart.
//   wte -> tok_emb, wpe -> pos_emb, h.i.ln_1 -> blocks.i.norm1, h.i.attn.c_attn -> attn.qkv,
//   h.i.attn.c_proj -> attn.out, h.i.ln_2 -> norm2, h.i.mlp.c_fc -> ffn.w1,
//   h.i.mlp.c_proj -> ffn.w2, ln_f -> norm_f, lm_head -> head (untied only).
// c_attn's fused (3 D) output rows are q, k, v in order, as recall's qkv. GPT-2's Conv1D stores a
// linear weight (in, out), recall and nanoGPT (out, in).
#pragma once
#include <string>
#include <vector>

#include "recall/models/model_config.h"

namespace recall {

struct Gpt2Name {
  std::string gpt2;    // GPT-2's name without the "transformer." prefix: h.0.attn.c_attn.weight
  std::string recall;  // recall's parameter: blocks.0.attn.qkv.weight
  bool transpose;      // stored (in, out) in the file: a Conv1D weight of a GPT-2 folder
};

// Every parameter of a recall model of GPT-2's architecture `c` (learned positions, LayerNorm, a
// GELU MLP; biases when c.bias), under GPT-2's names; `conv1d`: the file stores linear weights as
// GPT-2's Conv1D (in, out), not as nanoGPT's nn.Linear (out, in).
std::vector<Gpt2Name> gpt2_names(const ModelConfig& c, bool conv1d);

}  // namespace recall
