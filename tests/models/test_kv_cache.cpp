// Incremental decoding with a KV cache against the whole-sequence forward: the logits of every
// position agree, for each position kind, beta rule, learned memories and feed-forward kind.
#include <gtest/gtest.h>

#include "model_test_util.h"
#include "recall/models/transformer.h"

namespace recall {
namespace {

ModelConfig small(PosKind pos, BetaRule rule, FfnKind ffn) {
  // 12 tokens: past L except with learned positions
  ModelConfig c = test::small_model(13, 16, pos == PosKind::kLearned ? 12 : 5);
  c.pos = pos;
  c.attn_rule = rule;
  c.ffn = ffn;
  return c;
}

TEST(KvCache, IncrementalLogitsEqualTheFullForward) {
  std::vector<ModelConfig> configs;
  for (PosKind pos : {PosKind::kRope, PosKind::kLearned, PosKind::kNone})
    for (BetaRule rule : all_beta_rules()) configs.push_back(small(pos, rule, FfnKind::kMlp));
  auto mem = small(PosKind::kRope, BetaRule::kYarn, FfnKind::kLearnedKv);
  mem.attn_mem_kv = 3;
  mem.norm = NormKind::kLayerNorm;
  mem.bias = true;
  configs.push_back(mem);
  // the convolution's tail carried across calls, on its own and beside RoPE and memories
  for (int64_t conv : {2, 3}) {
    auto c = small(PosKind::kNone, BetaRule::kSu, FfnKind::kNone);
    c.attn_conv = conv;
    configs.push_back(c);
  }
  auto conv_rope = small(PosKind::kRope, BetaRule::kQwen, FfnKind::kMlp);
  conv_rope.attn_conv = 6;  // wider than the first call's 4 tokens
  conv_rope.attn_mem_kv = 2;
  configs.push_back(conv_rope);
  auto glu = small(PosKind::kRope, BetaRule::kSsmax, FfnKind::kGlu);
  glu.tied_head = true;
  configs.push_back(glu);
  // the Llama families' keys: a cache of G key/value heads, heads of their own width, Qwen3's
  // q and k norms, Qwen2's q, k, v biases, a RoPE base and an FFN width of their own
  auto gqa = small(PosKind::kRope, BetaRule::kNone, FfnKind::kGlu);
  gqa.n_heads = 4;
  gqa.n_kv_heads = 2;
  gqa.d_head = 6;
  gqa.attn_qk_rmsnorm = true;
  gqa.rope_base = 500000.0;
  gqa.intermediate_size = 20;
  gqa.norm_eps = 1e-6;
  configs.push_back(gqa);
  auto mqa = small(PosKind::kRope, BetaRule::kSu, FfnKind::kGlu);
  mqa.n_heads = 4;
  mqa.n_kv_heads = 1;
  mqa.qkv_bias = true;
  mqa.attn_conv = 3;
  mqa.attn_mem_kv = 2;
  configs.push_back(mqa);
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto& c = configs[i];
    torch::manual_seed(i);
    Transformer model(c);
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.1);
    model->eval();
    auto idx = torch::randint(c.vocab_size, {3, 12}, torch::kInt64);
    auto full = model->forward(idx);  // (3, 12, vocab)
    KvCache kv;
    std::vector<torch::Tensor> parts = {model->forward_incremental(idx.narrow(1, 0, 4), kv)};
    for (int64_t t = 4; t < 12; ++t)
      parts.push_back(model->forward_incremental(idx.narrow(1, t, 1), kv));
    EXPECT_EQ(kv.length(), 12);
    // the cache holds the key/value heads, not the query heads they serve
    EXPECT_EQ(kv.layers.front().k.size(2), c.kv_heads());
    const double diff = (torch::cat(parts, 1) - full).abs().max().item<double>();
    EXPECT_LT(diff, 1e-5) << "config " << i << ": pos " << to_string(c.pos) << ", rule "
                          << to_string(c.attn_rule) << ", ffn " << to_string(c.ffn);
    EXPECT_GT(full.abs().max().item<double>(), 0.1);  // logits that are not all ~0
  }
}

TEST(KvCache, LearnedPositionsStopAtSeqLen) {
  Transformer model(small(PosKind::kLearned, BetaRule::kNone, FfnKind::kMlp));
  torch::NoGradGuard no_grad;
  KvCache kv;
  model->forward_incremental(torch::zeros({1, 12}, torch::kInt64), kv);
  EXPECT_THROW(model->forward_incremental(torch::zeros({1, 1}, torch::kInt64), kv),
               std::invalid_argument);
}

}  // namespace
}  // namespace recall
