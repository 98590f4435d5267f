#include "recall/train/gpt2_names.h"

#include <fmt/format.h>

namespace recall {

std::vector<Gpt2Name> gpt2_names(const ModelConfig& c, bool conv1d) {
  std::vector<Gpt2Name> out = {{"wte.weight", "tok_emb.weight", false},
                               {"wpe.weight", "pos_emb.weight", false}};
  auto norm = [&](const std::string& gpt2, const std::string& recall) {
    out.push_back({gpt2 + ".weight", recall + ".weight", false});
    if (c.bias) out.push_back({gpt2 + ".bias", recall + ".bias", false});
  };
  auto linear = [&](const std::string& gpt2, const std::string& recall) {
    out.push_back({gpt2 + ".weight", recall + ".weight", conv1d});
    if (c.bias) out.push_back({gpt2 + ".bias", recall + ".bias", false});
  };
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string h = fmt::format("h.{}.", i), b = fmt::format("blocks.{}.", i);
    norm(h + "ln_1", b + "norm1");
    linear(h + "attn.c_attn", b + "attn.qkv");
    linear(h + "attn.c_proj", b + "attn.out");
    norm(h + "ln_2", b + "norm2");
    linear(h + "mlp.c_fc", b + "ffn.w1");
    linear(h + "mlp.c_proj", b + "ffn.w2");
  }
  norm("ln_f", "norm_f");
  if (!c.tied_head) out.push_back({"lm_head.weight", "head.weight", false});
  return out;
}

}  // namespace recall
