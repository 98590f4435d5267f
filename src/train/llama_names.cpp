#include "recall/train/llama_names.h"

#include <fmt/format.h>

namespace recall {

std::vector<LlamaName> llama_names(const ModelConfig& c) {
  const int64_t D = c.d_model, dh = c.head_dim(), q = c.n_heads * dh, kv = c.kv_heads() * dh,
                ffn = c.intermediate_size > 0 ? c.intermediate_size : c.ffn_mult * D;
  std::vector<LlamaName> out = {{"tok_emb.weight", {"model.embed_tokens.weight"}, {c.vocab_size}}};
  auto one = [&](const std::string& recall, const std::string& hf, int64_t rows) {
    out.push_back({recall, {hf}, {rows}});
  };
  // a linear map's weight, and its bias where `bias`
  auto linear = [&](const std::string& recall, const std::string& hf, int64_t rows, bool bias) {
    one(recall + ".weight", hf + ".weight", rows);
    if (bias) one(recall + ".bias", hf + ".bias", rows);
  };
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string h = fmt::format("model.layers.{}.", i), b = fmt::format("blocks.{}.", i);
    one(b + "norm1.weight", h + "input_layernorm.weight", D);
    const std::string a = h + "self_attn.";
    out.push_back({b + "attn.qkv.weight",
                   {a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"},
                   {q, kv, kv}});
    if (c.bias || c.qkv_bias)
      out.push_back({b + "attn.qkv.bias",
                     {a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias"},
                     {q, kv, kv}});
    if (c.attn_qk_rmsnorm) {
      one(b + "attn.q_norm", a + "q_norm.weight", dh);
      one(b + "attn.k_norm", a + "k_norm.weight", dh);
    }
    linear(b + "attn.out", a + "o_proj", D, c.bias);
    one(b + "norm2.weight", h + "post_attention_layernorm.weight", D);
    linear(b + "ffn.w1", h + "mlp.gate_proj", ffn, c.bias);
    linear(b + "ffn.w3", h + "mlp.up_proj", ffn, c.bias);
    linear(b + "ffn.w2", h + "mlp.down_proj", D, c.bias);
  }
  one("norm_f.weight", "model.norm.weight", D);
  if (!c.tied_head) one("head.weight", "lm_head.weight", c.vocab_size);
  return out;
}

}  // namespace recall
