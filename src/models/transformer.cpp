#include "recall/models/transformer.h"

#include <fmt/format.h>

#include "recall/core/error.h"
#include "recall/ops/gemm.h"
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
  blocks = register_module("blocks", torch::nn::ModuleList());
  const BlockOptions options = block_options(c);
  for (int64_t i = 0; i < c.n_layers; ++i) blocks->push_back(Block(options));
  norm_f = register_module("norm_f", Norm(options.norm()));
  if (!c.tied_head) head = register_module("head", make_linear(c.d_model, c.vocab_size, false));
}

std::shared_ptr<BlockImpl> TransformerImpl::block(size_t i) const {
  return blocks->ptr<BlockImpl>(i);
}

void TransformerImpl::load(torch::serialize::InputArchive& archive) {
  torch::serialize::InputArchive list;
  if (archive.try_read("blocks", list)) return Module::load(archive);
  // The layout before "blocks": block i beside tok_emb as "block<i>". The model's own tensors all
  // lie in its children, so reading each child reads everything.
  for (const auto& child : named_children()) {
    if (child.key() == "blocks") {
      for (size_t i = 0; i < blocks->size(); ++i) {
        torch::serialize::InputArchive sub;
        archive.read("block" + std::to_string(i), sub);
        block(i)->load(sub);
      }
    } else {
      torch::serialize::InputArchive sub;
      archive.read(child.key(), sub);
      child.value()->load(sub);
    }
  }
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& idx, ActivationCache* cache) {
  return logits(hidden(idx, cache));  // (B, T, vocab)
}

torch::Tensor TransformerImpl::forward_at(const torch::Tensor& idx, const torch::Tensor& mask) {
  check_arg(mask.sizes() == idx.sizes() && mask.scalar_type() == torch::kBool,
            "forward_at: expected a bool mask of the token ids' shape (B, T)");
  return logits(hidden(idx).index({mask}));  // (n, D) -> (n, vocab)
}

torch::Tensor TransformerImpl::logits(const torch::Tensor& h) {
  return fast_linear(h, head ? head->weight : tok_emb->weight);
}

torch::Tensor TransformerImpl::hidden(const torch::Tensor& idx, ActivationCache* cache) {
  check_arg(idx.dim() == 2 && idx.scalar_type() == torch::kInt64,
            fmt::format("idx: expected (B, T) int64 token ids, got {} dimensions", idx.dim()));
  const int64_t T = idx.size(1);
  check_arg(
      config.pos != PosKind::kLearned || T <= config.seq_len,
      fmt::format("sequence length {} exceeds seq_len = {} with pos = learned", T, config.seq_len));
  auto x = tok_emb(idx);  // (B, T, D)
  if (pos_emb) x = x + pos_emb->weight.narrow(0, 0, T);
  for (size_t i = 0; i < blocks->size(); ++i)
    x = cache ? block(i)->forward(x, *cache, fmt::format("blocks.{}.", i)) : block(i)->forward(x);
  return norm_f(x);  // (B, T, D)
}

torch::Tensor TransformerImpl::forward_incremental(const torch::Tensor& idx, KvCache& kv) {
  check_arg(idx.dim() == 2 && idx.scalar_type() == torch::kInt64,
            fmt::format("idx: expected (B, T) int64 token ids, got {} dimensions", idx.dim()));
  const int64_t offset = kv.length(), T = idx.size(1);
  check_arg(config.pos != PosKind::kLearned || offset + T <= config.seq_len,
            fmt::format("sequence length {} exceeds seq_len = {} with pos = learned", offset + T,
                        config.seq_len));
  check_arg(kv.layers.empty() ||
                (kv.layers.size() == blocks->size() && kv.layers.front().k.size(0) == idx.size(0)),
            "forward_incremental: the cache belongs to another model or batch size");
  kv.layers.resize(blocks->size());
  auto x = tok_emb(idx);  // (B, T, D)
  if (pos_emb) x = x + pos_emb->weight.narrow(0, offset, T);
  for (size_t i = 0; i < blocks->size(); ++i) x = block(i)->forward_incremental(x, kv.layers[i]);
  return logits(norm_f(x));  // (B, T, vocab)
}

void TransformerImpl::set_attn_rule(BetaRule rule) {
  config.attn_rule = rule;
  for (size_t i = 0; i < blocks->size(); ++i) block(i)->attn->set_rule(rule);
}

int64_t model_num_parameters(const ModelConfig& c) {
  const BlockOptions options = block_options(c);
  return c.vocab_size * c.d_model * (c.tied_head ? 1 : 2) +
         (c.pos == PosKind::kLearned ? c.seq_len * c.d_model : 0) +
         c.n_layers * block_num_parameters(options) + norm_num_parameters(options.norm());
}

int64_t TransformerImpl::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace recall
