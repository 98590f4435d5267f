// recall inspect: a feed-forward layer written from known keys gives the ISR the Store module
// computes; a trained mqar model has a recalling head; bad flags exit with 2.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "analysis/inspect_test_util.h"
#include "model_test_util.h"
#include "recall/analysis/inspect.h"
#include "recall/models/block.h"
#include "recall/stores/feed_forward.h"
#include "recall/stores/theory.h"
#include "train_test_util.h"

namespace recall {
namespace {

torch::Tensor unit_rows(const torch::Tensor& k) {
  return k / k.norm(2, 1, true);
}

// ISRs of a store holding (keys, values), key j queried as `scale` k_j / |k_j|, through forward().
std::vector<double> store_isr(const std::string& store_name, double beta, const torch::Tensor& keys,
                              const torch::Tensor& values, double scale) {
  auto store = make_store(StoreSpec::parse(store_name, beta), keys.size(1), values.size(1));
  store->write(keys, values);
  auto queries = unit_rows(keys) * scale;
  auto signal = store->recall_weights(queries).diagonal().unsqueeze(1) * values;  // w_jj v_j
  auto isr = ((store->forward(queries) - signal).norm(2, 1) / signal.norm(2, 1)).contiguous();
  return {isr.data_ptr<double>(), isr.data_ptr<double>() + isr.numel()};
}

void expect_summary_eq(const IsrSummary& a, const IsrSummary& b) {
  EXPECT_EQ(a.count, b.count);
  for (auto [x, y] : {std::pair{a.median, b.median},
                      {a.mean, b.mean},
                      {a.p10, b.p10},
                      {a.p90, b.p90},
                      {a.rms, b.rms}})
    EXPECT_NEAR(x, y, 1e-9 * (1 + std::abs(y)));
}

// A relu2 mlp whose first-layer rows are `keys` and second-layer columns `values`.
std::shared_ptr<Store> relu2_layer(const torch::Tensor& keys, const torch::Tensor& values) {
  const int64_t N = keys.size(0), D = keys.size(1);
  auto ffn = make_feed_forward(FeedForwardOptions(D).activation(Activation::kRelu2).mult(N / D));
  ffn->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  ffn->keys().copy_(keys);      // (N, D) the first-layer rows
  ffn->values().copy_(values);  // (N, D) a view of the second-layer columns
  return ffn;
}

TEST(InspectFfn, Relu2LayerMatchesStoreModule) {
  const int64_t D = 16, N = 64;
  torch::manual_seed(3);
  // keys of different norms (the layer's own scale), unit random values
  auto keys = torch::randn({N, D}, torch::kFloat64) * (torch::rand({N, 1}, torch::kFloat64) + 0.5);
  auto values = unit_rows(torch::randn({N, D}, torch::kFloat64));
  auto ffn = relu2_layer(keys, values);
  const FfnStoreReport r = inspect_feed_forward(ffn, 3);
  const auto isr = store_isr("relu2", 8.0, keys, values, 4.0);
  expect_summary_eq(r.isr, summarize(isr));
  EXPECT_EQ(r.layer, 3);
  EXPECT_EQ(r.kind, "mlp-relu2");
  EXPECT_EQ(r.keys, N);
  EXPECT_EQ(r.dim, D);
  int64_t below = 0;
  for (double x : isr) below += x < 1;
  EXPECT_DOUBLE_EQ(r.recalled, static_cast<double>(below) / N);
  EXPECT_GT(r.recalled, 0.0);
  EXPECT_DOUBLE_EQ(*r.theory, *theory_capacity(StoreSpec::parse("relu2"), D));
  // random keys in R^16: |cos| has mean about sqrt(2 / (pi d)) = 0.2
  EXPECT_NEAR(r.coherence_mean, 0.2, 0.03);
  EXPECT_LE(r.coherence_max, 1.0);
}

TEST(InspectFfn, OrthogonalKeysRecallWithoutInterference) {
  const int64_t D = 16;
  auto keys = torch::eye(D, torch::kFloat64) * 3.0;  // relu2 weights: 0 off the diagonal
  auto values = unit_rows(torch::randn({D, D}, torch::kFloat64));
  auto ffn = relu2_layer(keys, values);
  const FfnStoreReport r = inspect_feed_forward(ffn, 0);
  EXPECT_EQ(r.isr.count, D);
  EXPECT_DOUBLE_EQ(r.isr.p90, 0.0);
  EXPECT_DOUBLE_EQ(r.recalled, 1.0);
  EXPECT_DOUBLE_EQ(r.coherence_max, 0.0);
}

TEST(InspectFfn, LearnedKvSlotsMatchSoftmaxStorePerHead) {
  const int64_t D = 16, H = 2, S = 24;
  auto ffn = make_feed_forward(FeedForwardOptions(D).kind(FfnKind::kLearnedKv).slots(S).n_heads(H));
  ffn->to(torch::kFloat64);
  torch::manual_seed(5);
  {
    torch::NoGradGuard no_grad;
    ffn->keys().normal_(0.0, 1.0);  // |k| about sqrt(8): a sharp softmax
    ffn->values().normal_(0.0, 1.0);
  }
  const FfnStoreReport r = inspect_feed_forward(ffn, 1);
  // q = sqrt(d_head) k_hat_j and logits q . k_i / sqrt(d_head): a softmax store at beta = 1
  std::vector<double> isr;
  for (int64_t h = 0; h < H; ++h) {
    const auto x = store_isr("softmax", 1.0, ffn->keys()[h], ffn->values()[h], 1.0);
    isr.insert(isr.end(), x.begin(), x.end());
  }
  expect_summary_eq(r.isr, summarize(isr));
  EXPECT_EQ(r.kind, "learned_kv");
  EXPECT_EQ(r.keys, H * S);
  EXPECT_EQ(r.dim, D / H);
}

TEST(InspectFfn, EveryFeedForwardKindIsReadThroughTheStoreApi) {
  for (const auto& name : feed_forward_names()) {
    ModelConfig c = test::small_model(16, 16, 8, 1);
    std::tie(c.ffn, c.activation) = feed_forward_from_name(name);
    c.ffn_slots = 8;
    torch::manual_seed(3);
    Transformer model(c);
    const FfnStoreReport r = inspect_feed_forward(model->block(0)->ffn.ptr(), 0);
    EXPECT_EQ(r.kind, name);
    EXPECT_EQ(r.keys, c.ffn == FfnKind::kLearnedKv ? 2 * 8 : 2 * 16) << name;
    EXPECT_TRUE(std::isfinite(r.isr.median) && r.isr.median > 0) << name;
    // a theory wherever the kind has a written store (or, for gelu, a quadrature)
    const bool theory = name != "glu-relu" && name != "glu-relu2" && name != "glu-gelu";
    EXPECT_EQ(r.theory.has_value(), theory) << name;
  }
}

TEST(InspectModel, TrainedMqarHasRecallingHead) {
  Restored restored = restore(test::trained_small_mqar());
  InspectConfig config;
  config.lengths = {1, 2};
  config.rules = {BetaRule::kNone, BetaRule::kSu};
  const InspectResult r = inspect(restored, config, test::trained_small_mqar());
  SCOPED_TRACE(inspect_table(r));
  ASSERT_EQ(r.ffn.size(), 2u);
  EXPECT_EQ(r.ffn[0].kind, "mlp-gelu");
  EXPECT_EQ(r.ffn[0].keys, 32);
  ASSERT_EQ(r.attention.size(), 4u);  // (none, su) x (16, 32)
  const auto& at_train = r.attention[0];
  EXPECT_EQ(at_train.seq_len, 16);
  EXPECT_EQ(at_train.rule, BetaRule::kNone);
  EXPECT_GE(at_train.accuracy, 0.9);
  ASSERT_EQ(at_train.heads.size(), 4u);
  int recalling = 0;
  const HeadReport* best = &at_train.heads[0];
  for (const auto& h : at_train.heads) {
    EXPECT_EQ(h.isr.count, 2 * 64 * 2);  // batches x batch_size x pairs
    recalling += h.recalls();
    if (h.hit_rate > best->hit_rate) best = &h;
  }
  // the recalling head sits in the second layer (induction needs two): sharp and clean
  EXPECT_EQ(best->layer, 1);
  EXPECT_GE(best->hit_rate, 0.9);
  EXPECT_GT(best->pair_weight, 0.8);
  EXPECT_LT(best->isr.median, 0.1);
  EXPECT_GE(recalling, 1);
  // ablation: zeroing some head costs accuracy (the recall circuit needs it), and no ablated
  // accuracy exceeds what chance plus the remaining heads allow
  double worst = 1;
  for (const auto& h : at_train.heads) {
    EXPECT_GE(h.ablated_accuracy, 0.0);
    EXPECT_LE(h.ablated_accuracy, 1.0);
    worst = std::min(worst, h.ablated_accuracy);
  }
  EXPECT_LT(worst, at_train.accuracy - 0.3);
  EXPECT_EQ(restored.model->config.attn_rule, BetaRule::kNone);  // the trained rule is restored
}

TEST(InspectModel, PlotOfFeedForwardLayersOnly) {
  test::TempDir dir;
  InspectResult r;
  for (int64_t l = 0; l < 2; ++l) {
    FfnStoreReport f;
    f.layer = l;
    f.isr.median = 0.5 + l;
    f.isr.p10 = 0.1;
    f.isr.p90 = 4.0;
    r.ffn.push_back(f);
  }
  write_inspect_plot(r, dir / "ffn.png");
  EXPECT_EQ(test::read_text(dir / "ffn.png").substr(1, 3), "PNG");
}

TEST(InspectModel, CliWritesJsonAndRejectsBadFlags) {
  test::TempDir dir;
  const auto ok = test::run_cli(
      {"--threads", "1", "inspect", "--checkpoint", test::trained_small_mqar(), "--lengths", "1,2",
       "--rules", "none,qwen", "--json", dir / "i.json", "--plot", dir / "i.png"},
      dir);
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("L1H0"), std::string::npos) << ok.out;
  const auto j = nlohmann::json::parse(test::read_text(dir / "i.json"));
  EXPECT_EQ(j["ffn"].size(), 2u);
  ASSERT_EQ(j["attention"].size(), 4u);  // (none, qwen) x (16, 32)
  EXPECT_EQ(j["attention"][2]["rule"], "qwen");
  EXPECT_EQ(test::read_text(dir / "i.png").substr(1, 3), "PNG");
  const auto& head = j["attention"][0]["heads"][0];
  EXPECT_TRUE(head.contains("read_offset") && head.contains("ablated_accuracy")) << head;
  const test::UsageCases bad = {
      {{"inspect", "--checkpoint", test::trained_small_mqar(), "--lengths", "0"}, "--lengths 0"},
      // every head's weights, B H T^2 per layer: 256x (4,096 tokens) needs more than 64 MiB, an
      // explicit limit, so that the case holds on a machine of any size
      {{"inspect", "--checkpoint", test::trained_small_mqar(), "--lengths", "1,256", "--max-memory",
        "64M"},
       "--lengths 256 (4096 tokens) needs an estimated"},
      {{"inspect", "--checkpoint", test::trained_small_mqar(), "--lengths", "1,256", "--max-memory",
        "64M"},
       "more than --max-memory 64.0 MiB;"},
      {{"inspect", "--checkpoint", test::trained_small_mqar(), "--rules", "none,fast"}, "--rules"},
      {{"inspect", "--checkpoint", test::trained_small_mqar(), "--batches", "0"}, "--batches 0"},
      {{"inspect", "--checkpoint", dir / "missing"}, "missing"},
      {{"inspect", "--checkpoint", test::trained_small_mqar(), "--plot", dir / "i.gif"}, "--plot"},
  };
  test::expect_usage_errors(bad, dir);
  // --no-ablate leaves the ablated column unmeasured: a dash in the table, null in the JSON, never
  // a NaN
  const auto no_ablate =
      test::run_cli({"--threads", "1", "inspect", "--checkpoint", test::trained_small_mqar(),
                     "--lengths", "1", "--rules", "none", "--no-ablate", "--json", dir / "n.json"},
                    dir);
  ASSERT_EQ(no_ablate.code, 0) << no_ablate.err;
  EXPECT_EQ(no_ablate.out.find("nan"), std::string::npos) << no_ablate.out;
  EXPECT_NE(no_ablate.out.find("        -\n"), std::string::npos) << no_ablate.out;
  const auto n = nlohmann::json::parse(test::read_text(dir / "n.json"));
  EXPECT_TRUE(n["attention"][0]["heads"][0]["ablated_accuracy"].is_null());
}

}  // namespace
}  // namespace recall
