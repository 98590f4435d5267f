// Every feed-forward kind against the naive loops of model_reference.h.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "recall/stores/feed_forward.h"
#include "recall/stores/glu.h"
#include "recall/stores/learned_kv.h"
#include "recall/stores/mlp.h"
#include "stores/model_reference.h"

namespace recall {
namespace {

void expect_matches_naive(FeedForwardOptions options, const std::string& what) {
  torch::manual_seed(2);
  auto f = make_feed_forward(options);
  std::shared_ptr<torch::nn::Module> module = f;
  module->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : module->parameters()) p.normal_(0.0, 0.5);
  }
  auto x = torch::randn({2, 3, options.d_model()}, torch::kFloat64);  // (B, T, D)
  auto ref = test::feed_forward_naive(*f, options, x.reshape({6, options.d_model()}));
  auto fast = f->forward(x);
  ASSERT_EQ(fast.sizes(), x.sizes()) << what;
  // Tolerances: float64 sums of a few dozen terms, 1e-12; float32, 1e-4.
  EXPECT_LT((fast.reshape({6, -1}) - ref).abs().max().item<double>(), 1e-12) << what;
  // the recall weights are the hidden activations: forward is their second layer (not learned_kv,
  // whose weights are per head)
  if (options.kind() != FfnKind::kLearnedKv) {
    auto w = f->recall_weights(x);  // (B, T, N)
    ASSERT_EQ(w.size(-1), f->size()) << what;
    const auto params = module->named_parameters(true);  // find() points into it
    auto b2 = params.find("w2.bias");
    auto via = w.matmul(f->values()) + (b2 ? *b2 : torch::zeros({}, torch::kFloat64));
    EXPECT_LT((via - fast).abs().max().item<double>(), 1e-12) << what;
  } else {
    auto w = f->recall_weights(x);  // (B, T, H, S)
    EXPECT_EQ(w.sizes(), (std::vector<int64_t>{2, 3, options.n_heads(), options.slots()}));
    EXPECT_LT((w.sum(-1) - 1).abs().max().item<double>(), 1e-12) << what;
  }
  module->to(torch::kFloat32);
  auto fast32 = f->forward(x.to(torch::kFloat32)).to(torch::kFloat64);
  EXPECT_LT((fast32.reshape({6, -1}) - ref).abs().max().item<double>(), 1e-4) << what;
}

TEST(ModelFeedForward, LinearMatchesTheNaiveLoops) {
  for (bool bias : {false, true})
    expect_matches_naive(FeedForwardOptions(8).kind(FfnKind::kLinear).mult(2).bias(bias), "linear");
}

TEST(ModelFeedForward, MlpWithEveryActivationMatchesTheNaiveLoops) {
  for (auto act : {Activation::kRelu, Activation::kRelu2, Activation::kRelu3, Activation::kGelu,
                   Activation::kGeluTanh})
    for (bool bias : {false, true})
      expect_matches_naive(FeedForwardOptions(8).activation(act).mult(2).bias(bias),
                           "mlp " + to_string(act));
}

TEST(ModelFeedForward, GluWithEveryGateMatchesTheNaiveLoops) {
  for (auto gate : {Activation::kSilu, Activation::kRelu, Activation::kRelu2, Activation::kGelu})
    for (bool bias : {false, true})
      expect_matches_naive(
          FeedForwardOptions(8).kind(FfnKind::kGlu).activation(gate).mult(3).bias(bias),
          "glu " + to_string(gate));
}

TEST(ModelFeedForward, LearnedKvMatchesTheNaiveLoops) {
  expect_matches_naive(FeedForwardOptions(8).kind(FfnKind::kLearnedKv).slots(5).n_heads(2),
                       "learned_kv");
  expect_matches_naive(
      FeedForwardOptions(8).kind(FfnKind::kLearnedKv).slots(1).n_heads(1).bias(true),
      "learned_kv one slot");
}

TEST(ModelFeedForward, ParameterShapesKeysAndValues) {
  auto mlp = make_feed_forward(FeedForwardOptions(8).mult(4));
  auto mlp_impl = std::dynamic_pointer_cast<MlpStoreImpl>(mlp);
  ASSERT_TRUE(mlp_impl);
  EXPECT_EQ(mlp_impl->w1->weight.sizes(), (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(mlp_impl->w2->weight.sizes(), (std::vector<int64_t>{8, 32}));
  EXPECT_TRUE(mlp->keys().is_same(mlp_impl->w1->weight));  // a view, not a copy
  EXPECT_EQ(mlp->values().sizes(), (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(mlp->size(), 32);
  auto glu = std::dynamic_pointer_cast<GluStoreImpl>(
      make_feed_forward(FeedForwardOptions(8).kind(FfnKind::kGlu).mult(2)));
  ASSERT_TRUE(glu);
  EXPECT_TRUE(glu->keys().is_same(glu->w1->weight));  // the gate rows
  auto kv = make_feed_forward(FeedForwardOptions(8).kind(FfnKind::kLearnedKv).slots(16).n_heads(4));
  EXPECT_EQ(kv->keys().sizes(), (std::vector<int64_t>{4, 16, 2}));
  EXPECT_EQ(kv->values().sizes(), (std::vector<int64_t>{4, 16, 2}));
  EXPECT_EQ(kv->size(), 64);
  std::vector<std::string> names;
  for (const auto& item : kv->named_parameters()) names.push_back(item.key());
  EXPECT_EQ(names, (std::vector<std::string>{"keys", "values", "w1.weight", "w2.weight"}));
  EXPECT_THROW(make_feed_forward(FeedForwardOptions(8).kind(FfnKind::kLearnedKv)),
               std::invalid_argument);
  EXPECT_THROW(make_feed_forward(FeedForwardOptions(8).kind(FfnKind::kNone)),
               std::invalid_argument);
  EXPECT_THROW(make_feed_forward(FeedForwardOptions(8).mult(0)), std::invalid_argument);
}

TEST(ModelFeedForward, ParameterCountIsTheBuiltModules) {
  auto count = [](const FeedForwardOptions& o) {
    int64_t n = 0;
    for (const auto& p : make_feed_forward(o)->parameters()) n += p.numel();
    return n;
  };
  for (bool bias : {false, true}) {
    for (FfnKind kind : {FfnKind::kLinear, FfnKind::kMlp, FfnKind::kGlu}) {
      const auto o = FeedForwardOptions(6).kind(kind).mult(3).bias(bias);
      EXPECT_EQ(feed_forward_num_parameters(o), count(o)) << to_string(kind) << " bias " << bias;
      const auto wide = FeedForwardOptions(6).kind(kind).hidden(7).bias(bias);  // N = 7, not 4 D
      EXPECT_EQ(feed_forward_num_parameters(wide), count(wide)) << to_string(kind);
      EXPECT_EQ(make_feed_forward(wide)->size(), 7);
    }
    const auto kv = FeedForwardOptions(8).kind(FfnKind::kLearnedKv).slots(5).n_heads(4).bias(bias);
    EXPECT_EQ(feed_forward_num_parameters(kv), count(kv)) << "learned_kv bias " << bias;
  }
  EXPECT_EQ(feed_forward_num_parameters(FeedForwardOptions(8).kind(FfnKind::kNone)), 0);
  EXPECT_THROW(feed_forward_num_parameters(FeedForwardOptions(8).hidden(-1)),
               std::invalid_argument);
}

// Each kind is one row of the table, and the row is what every reader of a kind gets: its name,
// its module, its width, its start for fit and its written store.
TEST(ModelFeedForward, EveryKindIsOneRowOfTheTable) {
  const auto& rows = feed_forward_kinds();
  ASSERT_EQ(rows.size() + 1, all_ffn_kinds().size());  // none has no row
  for (size_t i = 0; i < rows.size(); ++i) {
    const FeedForwardKind& row = rows[i];
    SCOPED_TRACE(row.name);
    EXPECT_EQ(row.kind, all_ffn_kinds()[i]);  // in FfnKind order
    EXPECT_EQ(to_string(row.kind), row.name);
    EXPECT_EQ(ffn_kind_from_string(row.name), row.kind);
    EXPECT_EQ(&feed_forward_kind(row.kind), &row);
    EXPECT_EQ(row.has_activation, row.kind == FfnKind::kMlp || row.kind == FfnKind::kGlu);
    // N = 6 hidden units or slots, one head, on d = 8: as fit makes them
    const auto o = FeedForwardOptions(8).kind(row.kind).hidden(6).slots(6);
    auto store = row.make(o);
    EXPECT_EQ(store->feed_forward_options()->kind(), row.kind);
    EXPECT_EQ(row.activation_width(o), row.kind == FfnKind::kGlu ? 12 : 6);  // glu: gate, value
    // fit's start: drawn from the generator alone, keys of unit variance, values of value_std
    auto gen = at::detail::createCPUGenerator(5), gen2 = at::detail::createCPUGenerator(5);
    auto again = row.make(o);
    row.start_for_fit(*store, 8, 0.125, gen);
    row.start_for_fit(*again, 8, 0.125, gen2);
    for (const auto& [name, p] : store->named_parameters().pairs())
      EXPECT_TRUE(p.equal(again->named_parameters()[name])) << name;
    const auto params = store->named_parameters();
    if (row.kind == FfnKind::kLearnedKv) {
      EXPECT_TRUE(params["w1.weight"].equal(torch::eye(8) * std::sqrt(8.0)));  // logits k . x
      EXPECT_TRUE(params["w2.weight"].equal(torch::eye(8)));
    }
    const auto& values = params[row.kind == FfnKind::kLearnedKv ? "values" : "w2.weight"];
    EXPECT_NEAR(values.std().item<double>(), 0.125, 0.05);
    EXPECT_NEAR(store->keys().std().item<double>(), 1.0, 0.4);
  }
  // the written stores the kinds are compared with
  auto spec = [](FfnKind k, Activation a) {
    const auto s = written_store_spec(k, a, 3.0);
    return s ? s->name() : std::string("none");
  };
  EXPECT_EQ(spec(FfnKind::kLinear, Activation::kGelu), "linear");
  EXPECT_EQ(spec(FfnKind::kMlp, Activation::kRelu2), "relu2");
  EXPECT_EQ(spec(FfnKind::kMlp, Activation::kGelu), "none");
  EXPECT_EQ(spec(FfnKind::kGlu, Activation::kSilu), "swiglu");
  EXPECT_EQ(spec(FfnKind::kGlu, Activation::kRelu), "none");
  EXPECT_EQ(spec(FfnKind::kLearnedKv, Activation::kGelu), "softmax");
  EXPECT_EQ(written_store_spec(FfnKind::kLearnedKv, Activation::kGelu, 3.0)->weight.beta, 3.0);
  EXPECT_EQ(spec(FfnKind::kNone, Activation::kGelu), "none");
  EXPECT_THROW(feed_forward_kind(FfnKind::kNone), std::invalid_argument);
}

TEST(ModelFeedForward, AStoreNamesItsKind) {
  // the options a store reports build a store of the same kind and shapes
  for (const auto& o : {FeedForwardOptions(8).kind(FfnKind::kLinear).mult(2),
                        FeedForwardOptions(8).activation(Activation::kRelu3).bias(true),
                        FeedForwardOptions(8).kind(FfnKind::kGlu).activation(Activation::kGelu),
                        FeedForwardOptions(8).kind(FfnKind::kLearnedKv).slots(5).n_heads(2)}) {
    auto f = make_feed_forward(o);
    const auto named = f->feed_forward_options();
    ASSERT_TRUE(named.has_value());
    EXPECT_EQ(named->kind(), o.kind());
    if (o.kind() == FfnKind::kMlp || o.kind() == FfnKind::kGlu) {
      EXPECT_EQ(named->activation(), o.activation());
    }
    EXPECT_EQ(named->bias(), o.bias());
    auto again = make_feed_forward(*named);
    std::vector<std::vector<int64_t>> a, b;
    for (const auto& p : f->parameters()) a.push_back(p.sizes().vec());
    for (const auto& p : again->parameters()) b.push_back(p.sizes().vec());
    EXPECT_EQ(a, b) << to_string(o.kind());
    // the store is its module, and a clone is a deep copy
    EXPECT_EQ(std::dynamic_pointer_cast<Store>(std::shared_ptr<torch::nn::Module>(f)), f);
    auto copy = clone_store(f);
    EXPECT_TRUE(copy->keys().equal(f->keys()));
    EXPECT_FALSE(copy->keys().is_same(f->keys()));
  }
  // written stores: linear, mlp and glu are these kinds; the others are none
  EXPECT_EQ(make_store(StoreSpec::parse("relu2"), 4, 4)->feed_forward_options()->activation(),
            Activation::kRelu2);
  EXPECT_EQ(make_store(StoreSpec::parse("swiglu"), 4, 4)->feed_forward_options()->kind(),
            FfnKind::kGlu);
  for (const char* name : {"outer_product", "least_squares", "delta", "exp2", "softmax"})
    EXPECT_FALSE(make_store(StoreSpec::parse(name), 4, 4)->feed_forward_options()) << name;
}

TEST(ModelFeedForward, LearnedKvKeyWeightsAreItsRecallWeightsAfterWq) {
  // with Wq = I a query x is its own key-space query: key_weights per head equals recall_weights
  const int64_t D = 8, H = 2, S = 5, n = 3;
  torch::manual_seed(6);
  auto kv = make_feed_forward(FeedForwardOptions(D).kind(FfnKind::kLearnedKv).slots(S).n_heads(H));
  kv->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    const auto params = kv->named_parameters();  // find() points into it
    params.find("w1.weight")->copy_(torch::eye(D));
  }
  auto x = torch::randn({n, D}, torch::kFloat64);
  auto via_recall = kv->recall_weights(x).transpose(0, 1);                    // (H, n, S)
  auto via_keys = kv->key_weights(x.reshape({n, H, D / H}).transpose(0, 1));  // (H, n, S)
  EXPECT_LT((via_recall - via_keys).abs().max().item<double>(), 1e-12);
  EXPECT_THROW(kv->key_weights(x), std::invalid_argument);
}

TEST(ModelFeedForward, NamesOfEveryKindRoundTrip) {
  for (const auto& name : feed_forward_names()) {
    auto [kind, activation] = feed_forward_from_name(name);
    EXPECT_EQ(feed_forward_name(kind, activation), name);
  }
  // every kind and activation the config takes: its name comes back to it, one name each
  std::set<std::string> names;
  const auto listed = feed_forward_names();
  for (FfnKind kind : all_ffn_kinds()) {
    EXPECT_EQ(ffn_kind_from_string(to_string(kind)), kind);
    if (kind == FfnKind::kNone) continue;
    for (Activation activation : all_activations()) {
      SCOPED_TRACE(to_string(kind) + " " + to_string(activation));
      EXPECT_EQ(activation_from_string(to_string(activation)), activation);
      const auto name = feed_forward_name(kind, activation);
      const auto [k, a] = feed_forward_from_name(name);
      EXPECT_EQ(k, kind);
      if (kind == FfnKind::kMlp || kind == FfnKind::kGlu) {
        EXPECT_EQ(a, activation);
      }
      names.insert(name);
    }
  }
  // linear and learned_kv once, mlp and glu once per activation; the tests' list among them
  EXPECT_EQ(names.size(), 2 + 2 * all_activations().size());
  for (const auto& name : listed) EXPECT_EQ(names.count(name), 1u) << name;
  EXPECT_EQ(feed_forward_from_name("mlp-gelu_tanh"),
            std::make_pair(FfnKind::kMlp, Activation::kGeluTanh));
  EXPECT_EQ(all_ffn_kinds().back(), FfnKind::kNone);
  EXPECT_EQ(feed_forward_from_name("swiglu"), std::make_pair(FfnKind::kGlu, Activation::kSilu));
  try {
    feed_forward_from_name("moe");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'moe' is unknown"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("glu-<activation>"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("gelu_tanh"), std::string::npos);
  }
}

}  // namespace
}  // namespace recall
