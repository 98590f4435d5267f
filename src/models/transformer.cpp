#include <fmt/format.h>

#include "recall/core/error.h"
#include "recall/core/gemm.h"
#include "recall/models/block.h"
#include "recall/models/model.h"
#include "recall/models/norm.h"
#include "recall/stores/init.h"

namespace recall {

TransformerImpl::TransformerImpl(ModelConfig config_) : config(std::move(config_)) {
  reset();
}

void TransformerImpl::reset() {
  config.validate();
  const ModelConfig& c = config;
  tok_emb = register_module("tok_emb", torch::nn::Embedding(c.vocab_size, c.d_model));
  torch::NoGradGuard no_grad;
  tok_emb->weight.normal_(0.0, kInitStd);
  if (c.pos == PosKind::kLearned) {
    pos_emb = register_module("pos_emb", torch::nn::Embedding(c.seq_len, c.d_model));
    pos_emb->weight.normal_(0.0, kInitStd);
  }
  blocks.clear();
  for (int64_t i = 0; i < c.n_layers; ++i)
    blocks.push_back(register_module("block" + std::to_string(i), std::make_shared<BlockImpl>(c)));
  norm_f = register_module(
      "norm_f", std::make_shared<NormImpl>(NormOptions(c.d_model).kind(c.norm).bias(c.bias)));
  if (!c.tied_head) head = register_module("head", make_linear(c.d_model, c.vocab_size, false));
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& idx, ActivationCache* cache) {
  check_arg(idx.dim() == 2 && idx.scalar_type() == torch::kInt64,
            fmt::format("idx: expected (B, T) int64 token ids, got {} dimensions", idx.dim()));
  const int64_t T = idx.size(1);
  check_arg(
      config.pos != PosKind::kLearned || T <= config.seq_len,
      fmt::format("sequence length {} exceeds seq_len = {} with pos = learned", T, config.seq_len));
  auto x = tok_emb(idx);  // (B, T, D)
  if (pos_emb) x = x + pos_emb->weight.narrow(0, 0, T);
  for (size_t i = 0; i < blocks.size(); ++i)
    x = cache ? blocks[i]->forward(x, cache, fmt::format("blocks.{}.", i)) : blocks[i]->forward(x);
  x = norm_f->forward(x);
  return fast_linear(x, head ? head->weight : tok_emb->weight);  // (B, T, vocab)
}

torch::Tensor TransformerImpl::forward_incremental(const torch::Tensor& idx, KvCache& kv) {
  check_arg(idx.dim() == 2 && idx.scalar_type() == torch::kInt64,
            fmt::format("idx: expected (B, T) int64 token ids, got {} dimensions", idx.dim()));
  const int64_t offset = kv.length(), T = idx.size(1);
  check_arg(config.pos != PosKind::kLearned || offset + T <= config.seq_len,
            fmt::format("sequence length {} exceeds seq_len = {} with pos = learned", offset + T,
                        config.seq_len));
  check_arg(kv.layers.empty() ||
                (kv.layers.size() == blocks.size() && kv.layers.front().k.size(0) == idx.size(0)),
            "forward_incremental: the cache belongs to another model or batch size");
  kv.layers.resize(blocks.size());
  auto x = tok_emb(idx);  // (B, T, D)
  if (pos_emb) x = x + pos_emb->weight.narrow(0, offset, T);
  for (size_t i = 0; i < blocks.size(); ++i) x = blocks[i]->forward_incremental(x, kv.layers[i]);
  x = norm_f->forward(x);
  return fast_linear(x, head ? head->weight : tok_emb->weight);  // (B, T, vocab)
}

const torch::Tensor& ActivationCache::at(const std::string& name) const {
  auto it = tensors.find(name);
  check_arg(it != tensors.end(),
            fmt::format("activation '{}' is not in the cache ({} recorded)", name, tensors.size()));
  return it->second;
}

std::vector<std::string> ActivationCache::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors) out.push_back(name);
  return out;
}

void TransformerImpl::set_attn_rule(BetaRule rule) {
  config.attn_rule = rule;
  for (auto& block : blocks) block->attn->set_rule(rule);
}

int64_t TransformerImpl::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace recall
