// The activations of one forward pass, by name, for analysis: TransformerImpl::forward(idx, &cache)
// records, for each block i (B batch, T positions, H heads, dh = d_model / H, N = attn_mem_kv):
//   blocks.i.resid_pre     (B, T, D)        the residual stream entering the block
//   blocks.i.attn.q        (B, T, H, dh)    queries after RoPE (before the beta-rule scale)
//   blocks.i.attn.k        (B, N + T, H, dh) keys after RoPE, the N learned memories first
//   blocks.i.attn.v        (B, N + T, H, dh) values, the N learned memories first
//   blocks.i.attn.weights  (B, H, T, N + T) attention weights; rows sum to 1
//   blocks.i.attn.out      (B, T, D)        the attention sublayer's output (added to the stream)
//   blocks.i.resid_mid     (B, T, D)        resid_pre + attn.out
//   blocks.i.ffn.weights   (B, T, N_ffn)    the feed-forward store's recall weights (hidden
//                                           activations; learned_kv: (B, T, H, S)); ffn != none
//   blocks.i.ffn.out       (B, T, D)        the feed-forward sublayer's output; ffn != none
//   blocks.i.resid_post    (B, T, D)        the residual stream leaving the block
// With a cache the forward runs each sublayer's plain-torch path (slower; the cached pieces are
// what produced the logits). The tensors stay in the autograd graph when gradients are enabled.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "recall/core/torch.h"

namespace recall {

struct ActivationCache {
  std::map<std::string, torch::Tensor> tensors;

  void put(const std::string& name, const torch::Tensor& t) { tensors[name] = t; }
  bool contains(const std::string& name) const { return tensors.count(name) > 0; }
  // Throws std::invalid_argument naming the missing name.
  const torch::Tensor& at(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  void clear() { tensors.clear(); }
};

}  // namespace recall
