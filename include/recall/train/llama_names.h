// transformers' tensor names of the Llama families (LlamaForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM) for recall's parameters, read by import and written by export: one table, so
// the two directions cannot drift apart.
//   model.embed_tokens -> tok_emb, model.layers.i.input_layernorm -> blocks.i.norm1,
//   self_attn.{q,k,v}_proj -> attn.qkv (their rows stacked: H, G, G heads of d_head),
//   self_attn.{q,k}_norm -> attn.{q,k}_norm (Qwen3), self_attn.o_proj -> attn.out,
//   post_attention_layernorm -> norm2, mlp.gate_proj -> ffn.w1 (the gate), mlp.up_proj -> ffn.w3,
//   mlp.down_proj -> ffn.w2, model.norm -> norm_f, lm_head -> head (untied only).
// Every weight is torch.nn.Linear's (out, in), as recall's.
#pragma once
#include <string>
#include <vector>

#include "recall/models/model_config.h"

namespace recall {

struct LlamaName {
  std::string recall;           // recall's parameter: blocks.0.attn.qkv.weight
  std::vector<std::string> hf;  // transformers' names, their rows stacked in this order
  std::vector<int64_t> rows;    // the rows of each, beside hf
};

// Every parameter of a recall model of the Llama families' architecture `c` (RoPE, RMSNorm, a
// SwiGLU feed-forward; biases where c.bias or c.qkv_bias put them, q and k norms with
// c.attn_qk_rmsnorm), under transformers' names.
std::vector<LlamaName> llama_names(const ModelConfig& c);

}  // namespace recall
