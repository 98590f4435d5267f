// The model is assembled from the store modules: a store written through the probe's API is the
// module type a block trains; the activation cache records each block's pieces, and they
// reproduce the forward pass.
#include <gtest/gtest.h>

#include <typeinfo>

#include "model_test_util.h"
#include "recall/models/block.h"
#include "recall/models/norm.h"
#include "recall/models/transformer.h"
#include "recall/stores/store.h"

namespace recall {
namespace {

ModelConfig small(FfnKind ffn, Activation activation) {
  ModelConfig c = test::small_model(11, 16, 8);
  c.ffn = ffn;
  c.activation = activation;
  c.ffn_slots = 5;
  return c;
}

TEST(StoreFamily, WrittenStoreRecallsThenTheSameModuleTrainsInAModel) {
  // Written: 16 random unit keys in R^32 into the relu2 store of the probe (make_store).
  torch::manual_seed(1);
  auto K = torch::randn({16, 32}), V = torch::randn({16, 32});
  K = K / K.norm(2, 1, true);
  V = V / V.norm(2, 1, true);
  auto written = make_store(StoreSpec::parse("relu2"), 32, 32);
  written->write(K, V);
  auto W = written->recall_weights(K);  // (16, 16)
  auto signal = W.diagonal().unsqueeze(1) * V;
  auto isr = (W.mm(V) - signal).norm(2, 1) / signal.norm(2, 1);
  EXPECT_LT(isr.max().item<double>(), 1.0);  // every memory recalled

  // Trained: a model whose feed-forward layer is that module type learns a fixed batch.
  auto c = small(FfnKind::kMlp, Activation::kRelu2);
  c.d_model = 32;
  Transformer model(c);
  const Store& ffn = *model->block(0)->ffn;
  const Store& built = *written;  // typeid of a dereference would evaluate it (clang warns)
  EXPECT_EQ(typeid(ffn), typeid(built));
  const auto keys_before = ffn.keys().clone();
  auto idx = torch::randint(0, c.vocab_size, {8, 9});
  auto loss = [&] {
    auto logits = model(idx.narrow(1, 0, 8));
    return torch::nn::functional::cross_entropy(logits.reshape({-1, c.vocab_size}),
                                                idx.narrow(1, 1, 8).reshape(-1));
  };
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-2));
  const double before = loss().item<double>();
  for (int step = 0; step < 40; ++step) {
    adam.zero_grad();
    loss().backward();
    adam.step();
  }
  EXPECT_LT(loss().item<double>(), 0.7 * before);
  EXPECT_FALSE(torch::equal(ffn.keys(), keys_before));  // its keys were learned
}

std::vector<ModelConfig> cache_configs() {
  auto a = small(FfnKind::kMlp, Activation::kGelu);
  a.bias = true;
  a.attn_mem_kv = 3;
  auto b = small(FfnKind::kGlu, Activation::kSilu);
  b.attn_rule = BetaRule::kSsmax;
  auto c = small(FfnKind::kLearnedKv, Activation::kGelu);
  c.pos = PosKind::kLearned;
  c.norm = NormKind::kLayerNorm;
  auto d = small(FfnKind::kNone, Activation::kGelu);
  d.attn_rule = BetaRule::kSu;
  d.attn_mem_kv = 1;
  auto e = small(FfnKind::kLinear, Activation::kGelu);
  e.tied_head = true;
  return {a, b, c, d, e};
}

TEST(StoreFamily, ActivationCacheReproducesTheForwardPass) {
  // Tolerance: float64, 1e-10 (the cached path runs plain torch ops, the fast path fused kernels).
  for (const auto& c : cache_configs()) {
    SCOPED_TRACE(to_string(c.ffn) + " mem_kv " + std::to_string(c.attn_mem_kv));
    torch::manual_seed(2);
    Transformer model(c);
    model->to(torch::kFloat64);
    const int64_t B = 2, T = 7, H = c.n_heads, dh = c.head_dim(), N = c.attn_mem_kv;
    auto idx = torch::randint(0, c.vocab_size, {B, T});
    const auto fast = model(idx);
    ActivationCache cache;
    const auto logits = model->forward(idx, &cache);
    EXPECT_LT((logits - fast).abs().max().item<double>(), 1e-10);

    std::vector<std::string> want;
    for (int64_t i = 0; i < c.n_layers; ++i) {
      const std::string p = "blocks." + std::to_string(i) + ".";
      for (const char* name : {"resid_pre", "attn.q", "attn.k", "attn.v", "attn.weights",
                               "attn.out", "resid_mid", "resid_post"})
        want.push_back(p + name);
      if (c.ffn != FfnKind::kNone)
        for (const char* name : {"ffn.weights", "ffn.out"}) want.push_back(p + name);
    }
    std::sort(want.begin(), want.end());
    EXPECT_EQ(cache.names(), want);

    for (int64_t i = 0; i < c.n_layers; ++i) {
      const std::string p = "blocks." + std::to_string(i) + ".";
      auto at = [&](const char* name) { return cache.at(p + name); };
      EXPECT_EQ(at("attn.q").sizes(), (std::vector<int64_t>{B, T, H, dh}));
      EXPECT_EQ(at("attn.k").sizes(), (std::vector<int64_t>{B, N + T, H, dh}));
      EXPECT_EQ(at("attn.v").sizes(), (std::vector<int64_t>{B, N + T, H, dh}));
      auto w = at("attn.weights");
      ASSERT_EQ(w.sizes(), (std::vector<int64_t>{B, H, T, N + T}));
      EXPECT_LT((w.sum(-1) - 1).abs().max().item<double>(), 1e-12);
      // the pieces add up: the stream, attention through its weights, the next block's input
      auto& block = *model->block(i);
      auto y = block.attn->output(torch::einsum("bhts,bshd->bthd", {w, at("attn.v")}));
      EXPECT_LT((y - at("attn.out")).abs().max().item<double>(), 1e-12);
      EXPECT_TRUE(torch::allclose(at("resid_mid"), at("resid_pre") + at("attn.out")));
      auto post = at("resid_mid");
      if (c.ffn != FfnKind::kNone) {
        EXPECT_EQ(at("ffn.weights").size(0), B);
        EXPECT_EQ(at("ffn.weights").size(1), T);
        post = post + at("ffn.out");
      }
      EXPECT_TRUE(torch::allclose(at("resid_post"), post));
      if (i + 1 < c.n_layers) {
        EXPECT_TRUE(torch::equal(at("resid_post"),
                                 cache.at("blocks." + std::to_string(i + 1) + ".resid_pre")));
      }
    }
    // the last stream gives the logits
    auto last = cache.at("blocks." + std::to_string(c.n_layers - 1) + ".resid_post");
    auto head = model->head ? model->head->weight : model->tok_emb->weight;
    auto again = torch::matmul(model->norm_f->forward(last), head.t());
    EXPECT_LT((again - fast).abs().max().item<double>(), 1e-10);
  }
  ActivationCache empty;
  EXPECT_THROW(empty.at("blocks.0.attn.q"), std::invalid_argument);
}

}  // namespace
}  // namespace recall
