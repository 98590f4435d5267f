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
// The count without building the model (model_num_parameters, which the trainer's estimates read)
// is the built model's, for every shape of models/ under every feed-forward kind and attention
// variant.
TEST(ModelTransformer, ParameterCountWithoutBuildingIsTheModels) {
  const std::vector<std::string> variants = {"",
                                             "ffn = \"glu\"",
                                             "ffn = \"linear\"",
                                             "ffn = \"learned_kv\"\nffn_slots = 8",
                                             "ffn = \"none\"",
                                             "tied_head = true",
                                             "tied_head = false",
                                             "pos = \"learned\"",
                                             "norm = \"layernorm\"",
                                             "norm = \"layernorm\"\nbias = true",
                                             "norm = \"rmsnorm\"\nbias = true\nffn = \"glu\"",
                                             "attn_rule = \"ssmax\"",
                                             "attn_mem_kv = 3",
                                             "attn_conv = 3",
                                             "attn_scale_learned = true\nattn_qk_norm = true"};
  for (const auto& shape : model_shape_names())
    for (const auto& variant : variants) {
      toml::table table = read_model_shape(shape);
      for (auto&& [key, value] : toml::parse(variant)) table.insert_or_assign(key, value);
      const ModelConfig config = model_config_from_toml(table);
      EXPECT_EQ(model_num_parameters(config), Transformer(config)->num_parameters())
          << shape << ": " << variant;
    }
}

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
  for (int64_t l = 0; l < c.n_layers; ++l)
    EXPECT_EQ(model->block(l)->attn->options.rule(), BetaRule::kSsmax);
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
  // the copy's blocks are its own, and its holders point at its registered modules
  for (int64_t i = 0; i < c.n_layers; ++i) {
    EXPECT_NE(copy->block(i).get(), model->block(i).get()) << i;
    EXPECT_EQ(copy->block(i)->attn.get(), copy->block(i)->named_children()["attn"].get()) << i;
    if (copy->block(i)->ffn) {
      EXPECT_EQ(static_cast<torch::nn::Module*>(copy->block(i)->ffn.get()),
                copy->block(i)->named_children()["ffn"].get())
          << i;
    }
  }
  EXPECT_EQ(copy->norm_f.get(), copy->named_children()["norm_f"].get());
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
    EXPECT_EQ(model->block(i).get(), model->blocks[i]->as<BlockImpl>()) << prefix;
  }
}

// The state's names are what checkpoints, exports and the Python twin read: they must not change
// when the modules do. The lists are those recall wrote before the blocks held their feed-forward
// store as a module (read off its exports): every kind of parameter in one model, and learned_kv.
TEST(ModelTransformer, StateNamesAreTheCheckpointsNames) {
  ModelConfig a;
  a.vocab_size = 12, a.d_model = 16, a.n_layers = 2, a.n_heads = 2, a.seq_len = 8;
  a.pos = PosKind::kLearned, a.norm = NormKind::kLayerNorm, a.bias = true, a.tied_head = false;
  a.ffn = FfnKind::kGlu, a.activation = Activation::kSilu, a.ffn_mult = 2;
  a.attn_mem_kv = 2, a.attn_conv = 2, a.attn_rule = BetaRule::kSsmax;
  a.attn_qk_norm = true, a.attn_scale_learned = true, a.attn_scale = 4.0;
  std::vector<std::string> want = {"tok_emb.weight", "pos_emb.weight"};
  for (const std::string b : {"blocks.0.", "blocks.1."})
    for (const char* name :
         {"norm1.weight", "norm1.bias", "attn.mem_k", "attn.mem_v", "attn.conv", "attn.beta",
          "attn.qkv.weight", "attn.qkv.bias", "attn.out.weight", "attn.out.bias",
          "attn.ssmax.scale", "norm2.weight", "norm2.bias", "ffn.w1.weight", "ffn.w1.bias",
          "ffn.w2.weight", "ffn.w2.bias", "ffn.w3.weight", "ffn.w3.bias"})
      want.push_back(b + name);
  for (const char* name : {"norm_f.weight", "norm_f.bias", "head.weight"}) want.push_back(name);
  ModelConfig b;
  b.vocab_size = 12, b.d_model = 16, b.n_layers = 1, b.n_heads = 2, b.seq_len = 8;
  b.pos = PosKind::kNone, b.tied_head = true, b.ffn = FfnKind::kLearnedKv, b.ffn_slots = 4;
  b.attn_conv = 3;
  const std::vector<std::string> want_b = {"tok_emb.weight",
                                           "blocks.0.norm1.weight",
                                           "blocks.0.attn.conv",
                                           "blocks.0.attn.qkv.weight",
                                           "blocks.0.attn.out.weight",
                                           "blocks.0.norm2.weight",
                                           "blocks.0.ffn.keys",
                                           "blocks.0.ffn.values",
                                           "blocks.0.ffn.w1.weight",
                                           "blocks.0.ffn.w2.weight",
                                           "norm_f.weight"};
  for (const auto& [config, names] : {std::pair{a, want}, {b, want_b}}) {
    Transformer model(config);
    std::vector<std::string> got, buffers, want_buffers;
    for (const auto& p : model->named_parameters()) got.push_back(p.key());
    EXPECT_EQ(got, names);
    for (const auto& x : model->named_buffers()) buffers.push_back(x.key());
    for (int64_t i = 0; i < config.n_layers; ++i)
      want_buffers.push_back("blocks." + std::to_string(i) + ".attn.head_mask");
    EXPECT_EQ(buffers, want_buffers);
  }
}

}  // namespace
}  // namespace recall
