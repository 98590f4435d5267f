// The whole transformer: shapes, parameter count, causality, and gradients by central differences.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "model_test_util.h"
#include "recall/models/block.h"
#include "recall/models/transformer.h"

namespace recall {
namespace {

ModelConfig tiny(PosKind pos, NormKind norm, FfnKind ffn, BetaRule rule) {
  // T = 6 > L except with learned positions
  ModelConfig c = test::small_model(7, 8, pos == PosKind::kLearned ? 6 : 4);
  c.pos = pos;
  c.norm = norm;
  c.ffn = ffn;
  c.attn_rule = rule;
  return c;
}

std::vector<ModelConfig> tiny_configs() {
  auto a = tiny(PosKind::kRope, NormKind::kRmsNorm, FfnKind::kMlp, BetaRule::kSsmax);
  a.activation = Activation::kRelu2;
  a.tied_head = true;
  a.attn_mem_kv = 2;
  auto b = tiny(PosKind::kLearned, NormKind::kLayerNorm, FfnKind::kGlu, BetaRule::kSu);
  b.activation = Activation::kSilu;
  b.bias = true;
  auto c = tiny(PosKind::kNone, NormKind::kRmsNorm, FfnKind::kLearnedKv, BetaRule::kYarn);
  c.attn_conv = 3;
  auto d = tiny(PosKind::kRope, NormKind::kLayerNorm, FfnKind::kNone, BetaRule::kQwen);
  auto e = tiny(PosKind::kLearned, NormKind::kLayerNorm, FfnKind::kMlp, BetaRule::kNone);
  e.bias = true;
  auto f = tiny(PosKind::kRope, NormKind::kRmsNorm, FfnKind::kLinear, BetaRule::kNone);
  auto g = tiny(PosKind::kRope, NormKind::kRmsNorm, FfnKind::kGlu, BetaRule::kNone);
  g.activation = Activation::kRelu2;
  g.attn_mem_kv = 1;
  return {a, b, c, d, e, f, g};
}

std::string describe(const ModelConfig& c) {
  return to_string(c.pos) + "/" + to_string(c.norm) + "/" + to_string(c.ffn) + "/" +
         to_string(c.attn_rule);
}

TEST(ModelTransformer, BenchShapeHasThePeersParameterCount) {
  ModelConfig c;
  c.pos = PosKind::kLearned;
  c.norm = NormKind::kLayerNorm;
  c.bias = true;
  Transformer model(c);
  EXPECT_EQ(model->num_parameters(), 850688);  // scripts/peer_gpt.py
  auto logits = model(torch::randint(0, 96, {2, 10}));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 10, 96}));
}

// The head at the scored positions alone: the rows of the whole forward's logits (the same maths,
// a GEMM of fewer rows), within float32 rounding; an empty mask gives no rows.
TEST(ModelTransformer, ForwardAtIsTheWholeForwardsRows) {
  for (auto c : tiny_configs()) {
    c.attn_qk_norm = c.attn_rule == BetaRule::kYarn;  // one model with unit queries and keys
    torch::manual_seed(4);
    Transformer model(c);
    auto idx = torch::randint(0, c.vocab_size, {2, 6});
    auto mask = torch::rand({2, 6}) < 0.4;
    torch::NoGradGuard no_grad;
    const auto at = model->forward_at(idx, mask);
    ASSERT_EQ(at.size(0), mask.sum().item<int64_t>()) << describe(c);
    EXPECT_LT((at - model(idx).index({mask})).abs().max().item<double>(), 1e-5) << describe(c);
    EXPECT_EQ(model->forward_at(idx, torch::zeros({2, 6}, torch::kBool)).size(0), 0);
    EXPECT_THROW(model->forward_at(idx, torch::ones({2, 5}, torch::kBool)), std::invalid_argument);
  }
}

TEST(ModelTransformer, PastLogitsIgnoreFutureTokens) {
  for (const auto& c : tiny_configs()) {
    torch::manual_seed(3);
    Transformer model(c);
    auto idx = torch::randint(0, c.vocab_size, {2, 6});
    auto changed = idx.clone();
    changed.select(1, 4).fill_(0);
    changed.select(1, 5).fill_(0);
    idx.select(1, 4).fill_(1);
    auto a = model(idx), b = model(changed);
    EXPECT_LT((a.narrow(1, 0, 4) - b.narrow(1, 0, 4)).abs().max().item<double>(), 1e-6)
        << describe(c);
    EXPECT_GT((a.narrow(1, 4, 2) - b.narrow(1, 4, 2)).abs().max().item<double>(), 1e-6)
        << describe(c);
  }
}

TEST(ModelTransformer, GradientsMatchCentralDifferences) {
  const double h = 1e-6;
  for (const auto& c : tiny_configs()) {
    torch::manual_seed(4);
    Transformer model(c);
    model->to(torch::kFloat64);
    {
      torch::NoGradGuard no_grad;  // away from init so that every parameter matters
      for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.3);
    }
    auto idx = torch::randint(0, c.vocab_size, {2, 6});
    auto w = torch::randn({2, 6, c.vocab_size}, torch::kFloat64);
    auto loss = [&] { return (model(idx) * w).sum(); };
    model->zero_grad();
    loss().backward();
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) {
      const std::string& name = item.key();
      torch::Tensor p = item.value();
      auto flat = p.view(-1);
      for (int64_t i : {int64_t{0}, flat.numel() / 2, flat.numel() - 1}) {
        const double x0 = flat[i].item<double>();
        flat[i] = x0 + h;
        const double up = loss().item<double>();
        flat[i] = x0 - h;
        const double down = loss().item<double>();
        flat[i] = x0;
        const double numeric = (up - down) / (2 * h);
        const double analytic = p.grad().view(-1)[i].item<double>();
        EXPECT_NEAR(analytic, numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
            << describe(c) << " " << name << "[" << i << "]";
      }
    }
  }
}

TEST(ModelTransformer, SetAttnRuleReachesEveryLayer) {
  auto c = tiny(PosKind::kRope, NormKind::kRmsNorm, FfnKind::kMlp, BetaRule::kNone);
  Transformer model(c);
  const int64_t n = model->num_parameters();
  auto idx = torch::randint(0, c.vocab_size, {1, 6});
  auto before = model(idx);
  model->set_attn_rule(BetaRule::kSsmax);  // adds a learned scale per head and layer, = su
  EXPECT_EQ(model->config.attn_rule, BetaRule::kSsmax);
  EXPECT_EQ(model->num_parameters(), n + 2 * c.n_heads);
  for (auto& block : model->blocks) EXPECT_EQ(block->attn->options.rule(), BetaRule::kSsmax);
  auto ssmax = model(idx);
  model->set_attn_rule(BetaRule::kSu);
  EXPECT_LT((model(idx) - ssmax).abs().max().item<double>(), 1e-6);
  EXPECT_GT((model(idx) - before).abs().max().item<double>(), 1e-6);
}

TEST(ModelTransformer, BadInputsAreRejected) {
  auto c = tiny(PosKind::kLearned, NormKind::kRmsNorm, FfnKind::kMlp, BetaRule::kNone);
  Transformer model(c);
  EXPECT_THROW(model(torch::zeros({1, 7}, torch::kInt64)), std::invalid_argument);  // T > seq_len
  EXPECT_THROW(model(torch::zeros({1, 3}, torch::kFloat32)), std::invalid_argument);
  EXPECT_THROW(model(torch::zeros({3}, torch::kInt64)), std::invalid_argument);
  c.n_heads = 3;
  EXPECT_THROW(Transformer{c}, std::invalid_argument);
}

TEST(ModelTransformer, CloneCopiesEveryParameter) {
  auto c = tiny_configs()[0];
  Transformer model(c);
  auto copy = std::dynamic_pointer_cast<TransformerImpl>(model->clone());
  ASSERT_TRUE(copy);
  auto idx = torch::randint(0, c.vocab_size, {1, 6});
  EXPECT_TRUE(torch::equal(model(idx), copy->forward(idx)));
  EXPECT_EQ(copy->num_parameters(), model->num_parameters());
  // the typed blocks are the copy's own
  for (size_t i = 0; i < copy->blocks.size(); ++i) {
    EXPECT_EQ(copy->blocks[i].get(), copy->block_list[i]->as<BlockImpl>()) << i;
    EXPECT_NE(copy->blocks[i].get(), model->blocks[i].get()) << i;
  }
}

// The blocks are the list "blocks": parameter names carry the activation cache's prefixes.
TEST(ModelTransformer, ParameterNamesAreTheCachesNames) {
  auto c = tiny_configs()[0];
  Transformer model(c);
  ActivationCache cache;
  model->forward(torch::randint(0, c.vocab_size, {1, 6}), &cache);
  std::set<std::string> prefixes;
  for (const auto& p : model->named_parameters()) {
    const auto& name = p.key();
    if (name.rfind("blocks.", 0) != 0) continue;
    prefixes.insert(name.substr(0, name.find('.', 7) + 1));  // blocks.i.
    // blocks.i.attn.qkv.weight -> the cache holds blocks.i.attn.weights
    if (name.find(".attn.") != std::string::npos) {
      const std::string cached = name.substr(0, name.find(".attn.") + 6) + "weights";
      EXPECT_NO_THROW(cache.at(cached)) << name;
    }
  }
  EXPECT_EQ(prefixes.size(), static_cast<size_t>(c.n_layers));
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string prefix = "blocks." + std::to_string(i) + ".";
    EXPECT_EQ(prefixes.count(prefix), 1u) << prefix;
    EXPECT_NO_THROW(cache.at(prefix + "resid_pre"));
    EXPECT_EQ(model->blocks[i].get(), model->block_list[i]->as<BlockImpl>()) << prefix;
  }
}

}  // namespace
}  // namespace recall
