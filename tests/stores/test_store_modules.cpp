// Every store is a torch module whose state is registered: to(), parameters()/buffers(), clone()
// and torch::save/load see written and learned memories alike. Written stores recall what was
// written; the attention store's weights reproduce its fused forward.
#include <gtest/gtest.h>

#include <sstream>

#include "recall/stores/attention.h"
#include "recall/stores/feed_forward.h"
#include "recall/stores/glu.h"
#include "recall/stores/linear.h"
#include "recall/stores/mlp.h"
#include "recall/stores/store.h"
#include "recall/stores/weight_function_store.h"

namespace recall {
namespace {

torch::Tensor unit_rows(int64_t n, int64_t d, int seed) {
  torch::manual_seed(seed);
  auto x = torch::randn({n, d});
  return x / x.norm(2, 1, true);
}

const std::vector<std::string> kWritten = {"outer_product", "least_squares", "delta",  "linear",
                                           "relu",          "relu2",         "relu3",  "relu5",
                                           "swiglu",        "exp3",          "softmax"};

int64_t state_numel(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  for (const auto& b : m.buffers()) n += b.numel();
  return n;
}

std::shared_ptr<Store> reloaded(const std::shared_ptr<Store>& store,
                                const std::shared_ptr<Store>& fresh) {
  std::stringstream stream;
  torch::save(std::shared_ptr<torch::nn::Module>(store), stream);
  std::shared_ptr<torch::nn::Module> module = fresh;
  torch::load(module, stream);
  return fresh;
}

// Tolerances: float32 against float64 recall of 20 memories, 1e-5 relative; copies exactly equal.
TEST(StoreModules, WrittenMemoriesAreRegisteredState) {
  const auto K = unit_rows(20, 12, 1), V = unit_rows(20, 6, 2), X = unit_rows(5, 12, 3);
  for (const auto& name : kWritten) {
    SCOPED_TRACE(name);
    const auto spec = StoreSpec::parse(name, 4.0);
    std::shared_ptr<Store> store = make_store(spec, 12, 6);
    std::shared_ptr<torch::nn::Module> module = store;
    const int64_t empty = state_numel(*module);
    make_store(spec, 12, 6);  // a second store shares nothing with the first
    std::dynamic_pointer_cast<WritableStore>(store)->write(K, V);
    EXPECT_EQ(store->size(), 20);
    EXPECT_GE(state_numel(*module), empty + 20 * (12 + 6));  // keys and values at least
    EXPECT_EQ(store->keys().sizes(), (std::vector<int64_t>{20, 12}));
    EXPECT_EQ(store->values().sizes(), (std::vector<int64_t>{20, 6}));
    const auto want = store->forward(X);
    EXPECT_EQ(store->recall_weights(X).sizes(), (std::vector<int64_t>{5, 20}));

    // clone: the same recall, and an independent copy
    auto copy = clone_store(store);
    EXPECT_TRUE(torch::equal(copy->forward(X), want));
    std::dynamic_pointer_cast<WritableStore>(copy)->write(K.narrow(0, 0, 2), V.narrow(0, 0, 2));
    EXPECT_EQ(copy->size(), 22);
    EXPECT_EQ(store->size(), 20);

    // save and load into an empty store of the same kind
    auto loaded = reloaded(store, make_store(spec, 12, 6));
    EXPECT_EQ(loaded->size(), 20);
    EXPECT_TRUE(torch::equal(loaded->forward(X), want));

    // to(float64) converts every memory
    module->to(torch::kFloat64);
    for (const auto& t : module->buffers()) EXPECT_EQ(t.scalar_type(), torch::kFloat64);
    for (const auto& t : module->parameters()) EXPECT_EQ(t.scalar_type(), torch::kFloat64);
    const auto got = store->forward(X.to(torch::kFloat64));
    EXPECT_EQ(got.scalar_type(), torch::kFloat64);
    EXPECT_LT((got - want.to(torch::kFloat64)).abs().max().item<double>(),
              1e-5 * std::max(1.0, want.abs().max().item<double>()));
  }
}

TEST(StoreModules, WrittenTwoLayerStoresAreTheModelsModules) {
  // relu^p (p <= 3), linear and swiglu are written into the model's mlp, linear and glu modules:
  // one hidden unit per memory, keys the first-layer rows, values the second-layer columns.
  EXPECT_TRUE(std::dynamic_pointer_cast<MlpStoreImpl>(make_store(StoreSpec::parse("relu2"), 4, 4)));
  EXPECT_TRUE(
      std::dynamic_pointer_cast<LinearStoreImpl>(make_store(StoreSpec::parse("linear"), 4, 4)));
  auto glu = std::dynamic_pointer_cast<GluStoreImpl>(make_store(StoreSpec::parse("swiglu"), 4, 4));
  ASSERT_TRUE(glu);
  EXPECT_EQ(glu->options.gate(), Activation::kSilu);
  EXPECT_TRUE(std::dynamic_pointer_cast<WeightFunctionStoreImpl>(
      make_store(StoreSpec::parse("relu5"), 4, 4)));
  const auto K = unit_rows(6, 4, 4), V = unit_rows(6, 3, 5);
  auto mlp = make_store(StoreSpec::parse("relu3"), 4, 3);
  mlp->write(K, V);
  EXPECT_TRUE(torch::equal(mlp->keys(), K));
  EXPECT_TRUE(torch::equal(mlp->values(), V));
  EXPECT_EQ(mlp->parameters().size(), 2u);  // w1.weight, w2.weight: no biases
}

TEST(StoreModules, WrittenStoresRecallTheirKeysBelowCapacity) {
  // 16 random unit keys in R^64, far below every store's capacity there: each stored key's
  // interference-to-signal ratio ||sum_{i != j} w_i v_i|| / ||w_j v_j|| is below 1.
  const auto K = unit_rows(16, 64, 6), V = unit_rows(16, 64, 7);
  for (const auto& name : kWritten) {
    if (name == "outer_product" || name == "linear") continue;  // ISR ~ sqrt(M / d): near 1
    SCOPED_TRACE(name);
    auto store = make_store(StoreSpec::parse(name, 8.0), 64, 64);
    store->write(K, V);
    auto W = store->recall_weights(K);            // (16, 16)
    auto signal = W.diagonal().unsqueeze(1) * V;  // (32, 64)
    auto isr = (W.mm(V) - signal).norm(2, 1) / signal.norm(2, 1);
    EXPECT_LT(isr.max().item<double>(), 1.0);
  }
}

TEST(StoreModules, LearnedStoresRegisterEveryParameter) {
  const std::vector<std::pair<FeedForwardOptions, std::vector<std::string>>> kinds = {
      {FeedForwardOptions(8).kind(FfnKind::kLinear).mult(2), {"w1.weight", "w2.weight"}},
      {FeedForwardOptions(8).kind(FfnKind::kMlp).bias(true),
       {"w1.weight", "w1.bias", "w2.weight", "w2.bias"}},
      {FeedForwardOptions(8).kind(FfnKind::kGlu).activation(Activation::kRelu2),
       {"w1.weight", "w2.weight", "w3.weight"}},
      {FeedForwardOptions(8).kind(FfnKind::kLearnedKv).slots(3).n_heads(2),
       {"keys", "values", "w1.weight", "w2.weight"}}};
  auto x = torch::randn({2, 5, 8});
  for (const auto& [options, names] : kinds) {
    SCOPED_TRACE(to_string(options.kind()));
    torch::manual_seed(8);
    auto store = make_feed_forward(options);
    std::vector<std::string> got;
    for (const auto& item : store->named_parameters()) got.push_back(item.key());
    std::sort(got.begin(), got.end());
    auto want = names;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want);
    const auto y = store->forward(x);
    EXPECT_TRUE(torch::equal(clone_store(store)->forward(x), y));
    torch::manual_seed(9);
    EXPECT_TRUE(torch::equal(reloaded(store, make_feed_forward(options))->forward(x), y));
    store->to(torch::kFloat64);
    EXPECT_LT((store->forward(x.to(torch::kFloat64)) - y).abs().max().item<double>(), 1e-5);
  }
}

TEST(StoreModules, AttentionWeightsReproduceTheFusedForward) {
  // Tolerance: float64, 1e-10.
  for (auto rule : {BetaRule::kNone, BetaRule::kSu, BetaRule::kSsmax})
    for (int64_t N : {0, 3}) {
      SCOPED_TRACE(to_string(rule) + " mem_kv " + std::to_string(N));
      torch::manual_seed(10);
      Attention attn(AttentionOptions(16, 2, 8).rule(rule).mem_kv(N));
      attn->to(torch::kFloat64);
      auto x = torch::randn({2, 6, 16}, torch::kFloat64);
      auto w = attn->recall_weights(x);  // (B, H, T, N + T)
      ASSERT_EQ(w.sizes(), (std::vector<int64_t>{2, 2, 6, N + 6}));
      EXPECT_LT((w.sum(-1) - 1).abs().max().item<double>(), 1e-12);
      // query t sees no context key after it
      for (int64_t t = 0; t + 1 < 6; ++t)
        EXPECT_EQ(w.select(2, t).narrow(-1, N + t + 1, 6 - t - 1).abs().max().item<double>(), 0.0);
      const auto v = attn->trace(x).v;  // (B, N + T, H, dh)
      auto y = attn->output(torch::einsum("bhts,bshd->bthd", {w, v}));
      EXPECT_LT((y - attn->forward(x)).abs().max().item<double>(), 1e-10);
      EXPECT_EQ(attn->size(), N);
      EXPECT_EQ(attn->keys().sizes(), (std::vector<int64_t>{2, N, 8}));
      // clone and save/load carry the learned memories
      auto copy = std::dynamic_pointer_cast<AttentionImpl>(attn->clone());
      EXPECT_TRUE(torch::equal(copy->forward(x), attn->forward(x)));
      torch::manual_seed(11);
      auto fresh = std::make_shared<AttentionImpl>(AttentionOptions(16, 2, 8).rule(rule).mem_kv(N));
      fresh->to(torch::kFloat64);
      auto loaded = reloaded(attn.ptr(), fresh);
      EXPECT_TRUE(torch::equal(loaded->forward(x), attn->forward(x)));
      EXPECT_EQ(loaded->keys().scalar_type(), torch::kFloat64);
    }
}

}  // namespace
}  // namespace recall
