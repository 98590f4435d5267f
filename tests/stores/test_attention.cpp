// Attention against the naive reference of model_reference.h, for every beta rule.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <sstream>
#include <string>

#include "fast_gemm_test_util.h"
#include "recall/ops/causal_attention.h"
#include "recall/stores/attention.h"
#include "stores/model_reference.h"

namespace recall {
namespace {

Attention make_attention(BetaRule rule, bool rope, int64_t mem_kv, int64_t seq_len) {
  torch::manual_seed(1);
  Attention a(AttentionOptions(8, 2, seq_len).rule(rule).rope(rope).bias(true).mem_kv(mem_kv));
  a->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  for (auto& p : a->parameters()) p.normal_(0.0, 0.5);  // sharp enough for the rules to matter
  return a;
}

// Largest absolute difference between the fast attention and the naive loops.
double max_error(Attention& a, torch::ScalarType dtype) {
  auto x = torch::randn({2, 7, 8}, torch::kFloat64);
  auto ref = test::attention_naive(*a, x);
  a->to(dtype);
  auto fast = a->forward(x.to(dtype)).to(torch::kFloat64);
  a->to(torch::kFloat64);
  return (fast - ref).abs().max().item<double>();
}

TEST(ModelAttention, EveryRuleMatchesTheNaiveLoops) {
  // seq_len 4 < T = 7 so that qwen and yarn differ from su and none past L.
  for (BetaRule rule : all_beta_rules()) {
    for (bool rope : {true, false}) {
      auto a = make_attention(rule, rope, 0, 4);
      if (rule == BetaRule::kSsmax) {
        torch::NoGradGuard no_grad;
        a->ssmax->scale.copy_(torch::tensor({0.3, 1.7}, torch::kFloat64));  // distinct per head
      }
      EXPECT_LT(max_error(a, torch::kFloat64), 1e-12) << to_string(rule) << " rope " << rope;
      EXPECT_LT(max_error(a, torch::kFloat32), 2e-5) << to_string(rule) << " rope " << rope;
    }
  }
}

TEST(ModelAttention, MemoryKeyValuesMatchTheNaiveLoops) {
  for (BetaRule rule : {BetaRule::kNone, BetaRule::kSu}) {
    auto a = make_attention(rule, true, 3, 16);
    EXPECT_LT(max_error(a, torch::kFloat64), 1e-12) << to_string(rule);
    EXPECT_LT(max_error(a, torch::kFloat32), 2e-5) << to_string(rule);
  }
}

Attention make_conv_attention(int64_t conv, bool rope, int64_t mem_kv) {
  torch::manual_seed(2);
  Attention a(AttentionOptions(8, 2, 4).rope(rope).mem_kv(mem_kv).conv(conv));
  a->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  for (auto& p : a->parameters()) p.normal_(0.0, 0.5);
  return a;
}

TEST(ModelAttention, ConvolutionMatchesTheNaiveLoops) {
  for (int64_t conv : {2, 3, 9})  // 9 > T = 7: taps past the sequence start see zeros
    for (bool rope : {true, false}) {
      auto a = make_conv_attention(conv, rope, rope ? 2 : 0);
      EXPECT_LT(max_error(a, torch::kFloat64), 1e-12) << "conv " << conv << " rope " << rope;
      EXPECT_LT(max_error(a, torch::kFloat32), 2e-5) << "conv " << conv << " rope " << rope;
    }
}

// The essay's store: unit q and k per head with an explicit sharpness, fixed or learned per head,
// under every rule, with memories and a convolution, fast path (float32) and float64 against the
// naive loops.
TEST(ModelAttention, UnitQueriesAndKeysMatchTheNaiveLoops) {
  for (BetaRule rule : all_beta_rules())
    for (bool learned : {false, true}) {
      torch::manual_seed(4);
      Attention a(AttentionOptions(8, 2, 4)
                      .rule(rule)
                      .rope(learned)
                      .mem_kv(learned ? 2 : 0)
                      .conv(2)
                      .scale(6.0)
                      .qk_norm(true)
                      .learn_scale(learned));
      a->to(torch::kFloat64);
      {
        torch::NoGradGuard no_grad;
        for (auto& p : a->parameters()) p.normal_(0.0, 0.5);
        if (learned) a->beta.copy_(torch::tensor({3.0, 9.0}, torch::kFloat64));
      }
      const std::string what = to_string(rule) + (learned ? " learned" : " fixed");
      EXPECT_LT(max_error(a, torch::kFloat64), 1e-12) << what;
      EXPECT_LT(max_error(a, torch::kFloat32), 2e-5) << what;
    }
}

// The Llama families' attention: G key/value heads shared by H / G query heads each (G = H is
// multi-head attention, G = 1 multi-query), heads of their own width, Qwen3's RMSNorm of each
// head's q and k with learned gains, Qwen2's biases on q, k, v alone, a RoPE base of its own;
// fast path (float32, the fused kernel on the repeated keys) and float64 against the naive loops.
TEST(ModelAttention, GroupedQueriesAndQwenNormsMatchTheNaiveLoops) {
  for (int64_t G : {1, 2, 4})
    for (bool rmsnorm : {false, true})
      for (int64_t dh : {0, 6}) {
        torch::manual_seed(5);
        Attention a(AttentionOptions(8, 4, 16)
                        .n_kv_heads(G)
                        .d_head(dh)
                        .qkv_bias(true)
                        .qk_rmsnorm(rmsnorm)
                        .norm_eps(1e-6)
                        .rope_base(500000.0)
                        .mem_kv(G == 2 ? 2 : 0));
        ASSERT_EQ(a->qkv->weight.size(0), (4 + 2 * G) * (dh > 0 ? dh : 2));
        EXPECT_FALSE(a->out->bias.defined());  // qkv_bias: q, k and v alone
        int64_t n = 0;
        for (const auto& p : a->parameters()) n += p.numel();
        EXPECT_EQ(n, attention_num_parameters(a->options));
        a->to(torch::kFloat64);
        {
          torch::NoGradGuard no_grad;
          for (auto& p : a->parameters()) p.normal_(0.0, 0.5);
          if (rmsnorm) {  // gains about 1, unequal across channels
            a->q_norm.add_(1.0);
            a->k_norm.add_(1.0);
          }
        }
        const std::string what = fmt::format("G {} rmsnorm {} d_head {}", G, rmsnorm, dh);
        EXPECT_LT(max_error(a, torch::kFloat64), 1e-12) << what;
        EXPECT_LT(max_error(a, torch::kFloat32), 2e-5) << what;
      }
}

TEST(ModelAttention, UnitQueriesAndKeysBoundTheLogits) {
  // |beta cos| <= beta: the weights depend on the directions of q and k alone, so scaling the
  // q, k projection changes nothing, and the sharpness is what the layer says.
  torch::manual_seed(5);
  Attention a(AttentionOptions(8, 2, 16).rope(false).scale(6.0).qk_norm(true));
  torch::NoGradGuard no_grad;
  auto x = torch::randn({2, 16, 8});
  auto w = a->recall_weights(x);  // (B, H, T, T)
  a->qkv->weight.narrow(0, 0, 16).mul_(7.0);
  EXPECT_TRUE(torch::allclose(a->recall_weights(x), w, 1e-5, 1e-6));
  // the largest weight a query can give, e^beta / (e^beta + (M - 1) e^-beta), bounds every row
  for (int64_t t = 1; t < 16; ++t) {
    const double M = t + 1.0, bound = std::exp(6.0) / (std::exp(6.0) + (M - 1) * std::exp(-6.0));
    EXPECT_LE(w.select(2, t).max().item<double>(), bound + 1e-6) << t;
  }
  EXPECT_THROW(Attention(AttentionOptions(8, 2, 4).scale(0.0).qk_norm(true)),
               std::invalid_argument);
}

TEST(ModelAttention, LearnedScaleGetsAGradient) {
  torch::manual_seed(6);
  Attention a(AttentionOptions(8, 2, 4).rope(false).scale(6.0).qk_norm(true).learn_scale(true));
  ASSERT_TRUE(a->beta.defined());
  EXPECT_TRUE(torch::equal(a->beta, torch::full({2}, 6.0)));
  a->forward(torch::randn({2, 7, 8})).square().sum().backward();
  ASSERT_TRUE(a->beta.grad().defined());
  EXPECT_GT(a->beta.grad().abs().min().item<double>(), 0.0);
}

TEST(ModelAttention, ConvolutionIsCausal) {
  // Changing the input at positions >= t leaves the outputs before t exactly as they were.
  auto a = make_conv_attention(3, false, 0);
  torch::NoGradGuard no_grad;
  auto x = torch::randn({2, 9, 8}, torch::kFloat64);
  const auto y = a->forward(x);
  for (int64_t t = 1; t < 9; ++t) {
    auto x2 = x.clone();
    x2.narrow(1, t, 9 - t).normal_();
    const auto y2 = a->forward(x2);
    EXPECT_TRUE(torch::equal(y.narrow(1, 0, t), y2.narrow(1, 0, t))) << "t = " << t;
    EXPECT_FALSE(torch::allclose(y.narrow(1, t, 1), y2.narrow(1, t, 1))) << "t = " << t;
  }
}

TEST(ModelAttention, ConvolutionStartsAsTheIdentity) {
  // At initialisation c_0 = 1 and the rest 0: the same outputs as attention without one.
  torch::manual_seed(3);
  Attention plain(AttentionOptions(8, 2, 4).conv(0));
  torch::manual_seed(3);
  Attention conv(AttentionOptions(8, 2, 4).conv(4));
  ASSERT_EQ(conv->conv.sizes(), (std::vector<int64_t>{24, 4}));
  torch::NoGradGuard no_grad;
  auto x = torch::randn({2, 6, 8});
  EXPECT_TRUE(torch::allclose(plain->forward(x), conv->forward(x), 1e-6, 1e-7));
}

TEST(ModelAttention, ConvolutionWidthIsChecked) {
  for (int64_t conv : {int64_t{-1}, int64_t{1}, kMaxConv + 1})
    EXPECT_THROW(Attention(AttentionOptions(8, 2, 4).conv(conv)), std::invalid_argument) << conv;
}

TEST(ModelAttention, HeadMaskScalesEachHeadsOutput) {
  auto a = make_attention(BetaRule::kSu, true, 0, 4);
  EXPECT_FALSE(a->heads_masked());
  a->set_head_mask(torch::tensor({0.0, 1.0}));  // head 0 ablated
  EXPECT_TRUE(a->heads_masked());
  EXPECT_LT(max_error(a, torch::kFloat64), 1e-12);
  EXPECT_LT(max_error(a, torch::kFloat32), 2e-5);
  // both heads zeroed: only the output projection's bias is left
  a->set_head_mask(torch::zeros({2}));
  auto x = torch::randn({2, 7, 8}, torch::kFloat64);
  EXPECT_TRUE(torch::allclose(a->forward(x), a->out->bias.expand({2, 7, 8}), 0.0, 1e-15));
  // a clone keeps the mask and applies it
  auto copy = std::dynamic_pointer_cast<AttentionImpl>(a->clone());
  EXPECT_TRUE(copy->heads_masked());
  EXPECT_TRUE(torch::equal(copy->forward(x), a->forward(x)));
  // all ones again: the unmasked output, bit for bit
  auto fresh = std::dynamic_pointer_cast<AttentionImpl>(a->clone());
  fresh->set_head_mask(torch::ones({2}));
  a->set_head_mask(torch::tensor({1.0, 1.0}));
  EXPECT_FALSE(a->heads_masked());
  EXPECT_TRUE(torch::equal(a->forward(x), fresh->forward(x)));
  EXPECT_THROW(a->set_head_mask(torch::ones({3})), std::invalid_argument);
}

TEST(ModelAttention, HeadMaskIsStateThatOlderFilesLackAndLoadAsOnes) {
  auto a = make_attention(BetaRule::kNone, true, 2, 4);
  std::vector<std::string> buffers;
  for (const auto& b : a->named_buffers()) buffers.push_back(b.key());
  EXPECT_EQ(buffers, std::vector<std::string>{"head_mask"});
  EXPECT_TRUE(torch::equal(a->head_mask, torch::ones({2}, torch::kFloat64)));
  // a file with the parameters only (as written before head_mask was a buffer)
  torch::serialize::OutputArchive old;
  for (const auto& p : a->named_parameters(/*recurse=*/false)) old.write(p.key(), p.value());
  for (const auto& c : a->named_children()) {
    torch::serialize::OutputArchive sub;
    c.value()->save(sub);
    old.write(c.key(), sub);
  }
  std::stringstream bytes;
  old.save_to(bytes);
  auto b = make_attention(BetaRule::kNone, true, 2, 4);
  b->set_head_mask(torch::tensor({0.0, 1.0}));
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  b->load(in);
  EXPECT_FALSE(b->heads_masked());
  EXPECT_TRUE(torch::equal(b->head_mask, torch::ones({2}, torch::kFloat64)));
  auto x = torch::randn({2, 5, 8}, torch::kFloat64);
  EXPECT_TRUE(torch::equal(a->forward(x), b->forward(x)));
  // a file with a mask restores it
  b->set_head_mask(torch::tensor({0.0, 1.0}));
  std::stringstream masked;
  torch::save(b, masked);
  torch::load(a, masked);
  EXPECT_TRUE(a->heads_masked());
  EXPECT_TRUE(torch::equal(a->forward(x), b->forward(x)));
}

TEST(ModelAttention, RuleNoneIsStandardScaledDotProductAttention) {
  auto a = make_attention(BetaRule::kNone, false, 0, 16);
  auto x = torch::randn({1, 5, 8}, torch::kFloat64);
  auto qkv = test::linear_naive(x, a->qkv).view({1, 5, 3, 2, 4}).permute({2, 0, 3, 1, 4});
  auto logits = torch::matmul(qkv[0], qkv[1].transpose(-1, -2)) / 2.0;  // sqrt(d_head = 4)
  logits.masked_fill_(torch::ones({5, 5}, torch::kBool).triu(1), -INFINITY);
  auto y = torch::matmul(torch::softmax(logits, -1), qkv[2]).transpose(1, 2).reshape({1, 5, 8});
  EXPECT_LT((a->forward(x) - test::linear_naive(y, a->out)).abs().max().item<double>(), 1e-12);
}

// The names of the autograd nodes behind y.
std::set<std::string> graph_nodes(const torch::Tensor& y) {
  std::set<std::string> names;
  std::vector<torch::autograd::Node*> todo{y.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    auto* node = todo.back();
    todo.pop_back();
    if (!node || !seen.insert(node).second) continue;
    names.insert(node->name());
    for (const auto& edge : node->next_edges()) todo.push_back(edge.function.get());
  }
  return names;
}

bool has_node(const std::set<std::string>& names, const std::string& part) {
  for (const auto& n : names)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

// A GPT-shaped store (no RoPE, memories, convolution or norms of q and k; rule none) hands the
// fused kernel its projection whole (causal_attention_packed), whose backward writes one gradient;
// a store with RoPE cannot, and runs the kernel on q, k and v. Both train as the float64 reference
// does (values and gradients of the input and every parameter).
TEST(ModelAttention, GptShapedHeadsTakeThePackedKernel) {
  RECALL_FAST_GEMM_OR_SKIP();
  for (bool rope : {false, true}) {
    auto a = make_attention(BetaRule::kNone, rope, 0, 16);  // float64: the reference path
    auto x = torch::randn({2, 70, 8}, torch::kFloat64);
    auto g = torch::randn({2, 70, 8}, torch::kFloat64);
    auto x64 = x.clone().requires_grad_(true);
    (a->forward(x64) * g).sum().backward();
    std::vector<torch::Tensor> want{x64.grad()};
    for (const auto& p : a->parameters()) want.push_back(p.grad().clone());
    a->zero_grad();
    a->to(torch::kFloat32);
    auto x32 = x.to(torch::kFloat32).requires_grad_(true);
    auto y = a->forward(x32);
    const auto nodes = graph_nodes(y);
    EXPECT_EQ(has_node(nodes, "PackedAttentionFunction"), !rope) << "rope " << rope;
    EXPECT_EQ(has_node(nodes, "CausalAttentionFunction"), rope) << "rope " << rope;
    (y * g.to(torch::kFloat32)).sum().backward();
    std::vector<torch::Tensor> got{x32.grad()};
    for (const auto& p : a->parameters()) got.push_back(p.grad());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_LT((got[i].to(torch::kFloat64) - want[i]).abs().max().item<double>(), 1e-4)
          << "rope " << rope << ", gradient " << i;
  }
}

TEST(ModelAttention, SsmaxStartsEqualToSuAndSetRuleAddsItsScale) {
  auto a = make_attention(BetaRule::kSu, true, 0, 4);
  auto x = torch::randn({2, 7, 8}, torch::kFloat64);
  auto su = a->forward(x);
  EXPECT_FALSE(a->ssmax);
  a->set_rule(BetaRule::kSsmax);
  ASSERT_TRUE(a->ssmax);
  a->to(torch::kFloat64);
  EXPECT_LT((a->forward(x) - su).abs().max().item<double>(), 1e-6);  // scale made in float32
  EXPECT_EQ(a->named_parameters().size(), 5u);  // qkv, out (weight, bias), ssmax.scale
  auto copy = std::dynamic_pointer_cast<AttentionImpl>(a->clone());
  EXPECT_EQ(copy->named_parameters().size(), 5u);
  a->set_rule(BetaRule::kNone);
  EXPECT_GT((a->forward(x) - su).abs().max().item<double>(), 1e-3);
}

TEST(ModelAttention, LogitScaleFollowsTheRule) {
  auto a = make_attention(BetaRule::kQwen, false, 0, 4);
  auto s = a->logit_scale(8, torch::kFloat64).squeeze(0) * std::sqrt(4.0);  // (T,) beta / beta_0
  for (int64_t t = 0; t < 8; ++t)
    EXPECT_NEAR(s[t].item<double>(), std::max(1.0, std::log(t + 1.0) / std::log(4.0)), 1e-12);
}

// With unit q and k the logit of a query at position t is beta(t + 1) cos(q, k): attn_scale is beta
// itself (no 1 / sqrt(d_head)), the rule's factor enters past the training length L, and a
// learned scale multiplies per head.
TEST(ModelAttention, UnitQueriesTakeTheRulesFactorAtEvaluationLengths) {
  const int64_t L = 32;
  for (bool learned : {false, true}) {
    Attention a(
        AttentionOptions(8, 2, L).rope(false).scale(6.0).qk_norm(true).learn_scale(learned));
    if (learned) {
      torch::NoGradGuard no_grad;
      a->beta.copy_(torch::tensor({6.0, 3.0}));
    }
    for (BetaRule rule : {BetaRule::kNone, BetaRule::kSu, BetaRule::kQwen, BetaRule::kYarn}) {
      a->set_rule(rule);
      const auto s = a->logit_scale(8 * L, torch::kFloat64);  // (1 or H, T)
      for (int64_t h = 0; h < (learned ? 2 : 1); ++h)
        for (int64_t t : {int64_t{0}, L - 1, 2 * L - 1, 8 * L - 1}) {
          const double base = learned && h == 1 ? 3.0 : 6.0;
          const double want = base * beta_for(rule, t + 1.0, static_cast<double>(L), 1.0);
          EXPECT_NEAR(s[s.size(0) == 1 ? 0 : h][t].item<double>(), want, 1e-5 * want)
              << to_string(rule) << " t " << t << " head " << h;
        }
    }
  }
}

// attn_scale s multiplies every logit: the same as multiplying the query projection by s (RoPE is
// linear in q), under every rule and with memory key-values.
TEST(ModelAttention, ScaleMultipliesTheLogitsLikeScaledQueries) {
  for (BetaRule rule : all_beta_rules())
    for (double s : {0.25, 3.0}) {
      auto a = make_attention(rule, true, 2, 4);
      auto scaled = std::dynamic_pointer_cast<AttentionImpl>(a->clone());
      scaled->options.scale(s);
      {
        torch::NoGradGuard no_grad;
        a->qkv->weight.narrow(0, 0, 8).mul_(s);  // the q rows of [q; k; v]
        a->qkv->bias.narrow(0, 0, 8).mul_(s);
      }
      auto x = torch::randn({2, 7, 8}, torch::kFloat64);
      EXPECT_TRUE(torch::allclose(scaled->forward(x), a->forward(x), 1e-12, 1e-12))
          << to_string(rule) << " scale " << s;
      EXPECT_TRUE(torch::allclose(scaled->recall_weights(x), a->recall_weights(x), 1e-12, 1e-12))
          << to_string(rule) << " scale " << s;
    }
}

// attend_reference with a KV offset (what incremental decoding runs): the rows of the later queries
// of the whole sequence, and decoding in pieces matches the naive loops, under rules whose scale
// depends on the position, with memories. Tolerance: float64, 1e-12.
TEST(ModelAttention, AttendAtAnOffsetIsTheWholeSequencesLaterRows) {
  for (BetaRule rule : {BetaRule::kSu, BetaRule::kSsmax}) {
    SCOPED_TRACE(to_string(rule));
    auto a = make_attention(rule, true, 2, 4);
    if (rule == BetaRule::kSsmax) {
      torch::NoGradGuard no_grad;
      a->ssmax->scale.copy_(torch::tensor({0.3, 1.7}, torch::kFloat64));
    }
    auto x = torch::randn({2, 7, 8}, torch::kFloat64);
    const auto t = a->trace(x);
    const auto &q = t.q, &k = t.k, &v = t.v;  // (2, 7, 2, 4), (2, 2 + 7, 2, 4) twice
    const auto whole = a->attend_reference(q, k, v);
    const auto later = a->attend_reference(q.narrow(1, 3, 4), k, v, 3);
    EXPECT_LT((later.y - whole.y.narrow(1, 3, 4)).abs().max().item<double>(), 1e-12);
    EXPECT_LT((later.weights - whole.weights.narrow(2, 3, 4)).abs().max().item<double>(), 1e-12);
    EXPECT_FALSE(a->attend_reference(q, k, torch::Tensor()).y.defined());
    EXPECT_THROW(a->attend_reference(q, k, v, 1), std::invalid_argument);  // k is 1 row short

    AttentionKv kv;
    auto pieces = torch::cat({a->forward_incremental(x.narrow(1, 0, 3), kv),
                              a->forward_incremental(x.narrow(1, 3, 1), kv),
                              a->forward_incremental(x.narrow(1, 4, 3), kv)},
                             1);
    EXPECT_LT((pieces - test::attention_naive(*a, x)).abs().max().item<double>(), 1e-12);
  }
}

TEST(ModelAttention, RejectsANonPositiveScale) {
  for (double s : {0.0, -1.0, std::nan("")})
    EXPECT_THROW(Attention(AttentionOptions(8, 2, 4).scale(s)), std::invalid_argument) << s;
}

// The length emulation of the layered forecast against a longer prompt built for it: without
// positions, attention does not see the order of its keys, so a prompt holding every key but the
// query's heaviest m times (the query's own key among them) gives the query the output that the
// emulation, count m, computes at the original length. Its multiplier table replaces the layer's:
// twice the multiplier gives the weights of the layer at twice its scale.
TEST(ModelAttention, LengthEmulationIsTheLongerPromptOfCopies) {
  constexpr int64_t T = 9, m = 5;
  torch::manual_seed(8);
  Attention a(AttentionOptions(8, 1, T).rope(false).scale(6.0).qk_norm(true));
  a->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({1, T, 8}, torch::kFloat64);
  const int64_t c = a->recall_weights(x)[0][0][T - 1].argmax().item<int64_t>();
  std::vector<torch::Tensor> rows;  // the longer prompt: each other key m times, c once, then t
  for (int64_t j = 0; j < T; ++j)
    if (j != c)
      for (int64_t k = 0; k < (j == T - 1 ? m - 1 : m); ++k) rows.push_back(x[0][j]);
  if (c != T - 1) rows.push_back(x[0][c]);
  rows.push_back(x[0][T - 1]);
  const auto longer = torch::stack(rows).unsqueeze(0);  // (1, (T - 1) m + 1, 8)
  ASSERT_EQ(longer.size(1), (T - 1) * m + 1);
  const auto want = a->forward(longer)[0][longer.size(1) - 1];  // (8,)
  const auto scale = a->logit_scale(T, torch::kFloat64);        // (1, T)
  a->set_length_emulation({scale, torch::full({T}, static_cast<double>(m), torch::kFloat64)});
  const auto got = a->forward(x)[0][T - 1];
  EXPECT_TRUE(torch::allclose(got, want, 1e-10, 1e-12)) << got << want;
  // count 1 and the layer's own multipliers: the plain attention
  a->set_length_emulation({scale, torch::ones({T}, torch::kFloat64)});
  const auto same = a->forward(x);
  a->set_length_emulation({});
  EXPECT_TRUE(torch::allclose(same, a->forward(x), 1e-12, 1e-14));
  EXPECT_FALSE(torch::allclose(got, a->forward(x)[0][T - 1], 1e-6, 1e-8));  // the copies count
  // the multiplier table: twice the layer's is the layer at scale 12
  Attention b(AttentionOptions(8, 1, T).rope(false).scale(12.0).qk_norm(true));
  b->to(torch::kFloat64);
  b->qkv->weight.copy_(a->qkv->weight);
  a->set_length_emulation({2 * scale, torch::ones({T}, torch::kFloat64)});
  EXPECT_TRUE(torch::allclose(a->recall_weights(x), b->recall_weights(x), 1e-12, 1e-14));
}

// The emulation in quadrature (the accuracy forecast) against naive loops over its formula: the
// other keys' values add count_t times about their causal mean and sqrt(count_t) times in their
// spread, the read key once. count 1 is the plain attention, and with values that differ it is not
// the emulation of copies.
TEST(ModelAttention, LengthEmulationInQuadratureMatchesTheNaiveLoops) {
  constexpr int64_t T = 9, H = 2, m = 5;
  torch::manual_seed(9);
  Attention a(AttentionOptions(8, H, T).rope(false).scale(6.0).qk_norm(true));
  a->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({1, T, 8}, torch::kFloat64);
  const auto scale = a->logit_scale(T, torch::kFloat64);  // (1, T)
  std::vector<double> counts;
  for (int64_t t = 0; t < T; ++t)
    counts.push_back(std::max(1.0, static_cast<double>(m * (t + 1) - 1) / std::max<double>(t, 1)));
  const auto count = torch::tensor(counts, torch::kFloat64);
  a->set_length_emulation({scale, count, /*quadrature=*/true});
  const AttentionTrace tr = a->trace(x);
  const int64_t dh = tr.v.size(3);
  auto y = torch::zeros({1, T, H, dh}, torch::kFloat64);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t) {
      const auto w = tr.weights[0][h][t];  // (T,)
      const int64_t c = w.argmax().item<int64_t>();
      const double n = counts[static_cast<size_t>(t)];
      auto v_bar = torch::zeros({dh}, torch::kFloat64), sum = torch::zeros({dh}, torch::kFloat64);
      double W = 0;
      for (int64_t j = 0; j <= t; ++j) {
        v_bar += tr.v[0][j][h] / static_cast<double>(t + 1);
        if (j == c) continue;
        W += w[j].item<double>();
        sum += w[j].item<double>() * tr.v[0][j][h];
      }
      const double wc = w[c].item<double>();
      y[0][t][h] =
          (wc * tr.v[0][c][h] + n * W * v_bar + std::sqrt(n) * (sum - W * v_bar)) / (wc + n * W);
    }
  const auto want = a->out->forward(y.reshape({1, T, H * dh}));
  EXPECT_TRUE(torch::allclose(tr.out, want, 1e-10, 1e-12)) << tr.out << want;
  a->set_length_emulation({scale, count});  // the copies, in phase
  EXPECT_FALSE(torch::allclose(a->forward(x), tr.out, 1e-6, 1e-8));
  a->set_length_emulation({scale, torch::ones({T}, torch::kFloat64), /*quadrature=*/true});
  const auto once = a->forward(x);
  a->set_length_emulation({});
  EXPECT_TRUE(torch::allclose(once, a->forward(x), 1e-12, 1e-14));
}

}  // namespace
}  // namespace recall
