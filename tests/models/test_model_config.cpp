// ModelConfig: validation messages, enum names, TOML reading.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <cmath>

#include "recall/models/model_config.h"

namespace recall {
namespace {

// Expects validate() to throw std::invalid_argument whose message contains every fragment.
void expect_rejected(const ModelConfig& c, const std::vector<std::string>& fragments) {
  try {
    c.validate();
    FAIL() << "accepted an invalid config";
  } catch (const std::invalid_argument& e) {
    for (const auto& f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos)
          << "message '" << e.what() << "' lacks '" << f << "'";
  }
}

TEST(ModelConfig, DefaultsAreValid) {
  EXPECT_NO_THROW(ModelConfig{}.validate());
}

TEST(ModelConfig, RejectsBadValuesNamingKeyValueAndRange) {
  ModelConfig c;
  c.d_model = 130;
  expect_rejected(c, {"d_model = 130", "n_heads = 4", "divisible"});
  c = {};
  c.vocab_size = 0;
  expect_rejected(c, {"vocab_size = 0", "in [1, "});
  c = {};
  c.vocab_size = -5;
  expect_rejected(c, {"vocab_size = -5", "in [1, "});
  c = {};
  c.ffn = FfnKind::kLearnedKv;
  expect_rejected(c, {"ffn_slots = 0", ">= 1", "learned_kv"});
  c = {};
  c.d_model = 12;
  c.n_heads = 4;  // head dim 3
  expect_rejected(c, {"3", "even", "rope"});
  c.pos = PosKind::kLearned;  // odd head dims are fine without rope
  EXPECT_NO_THROW(c.validate());
  c = {};
  c.seq_len = 1;
  expect_rejected(c, {"seq_len = 1", "in [2, "});
  c = {};
  c.attn_mem_kv = -1;
  expect_rejected(c, {"attn_mem_kv = -1", "in [0, "});
  c = {};
  c.attn_scale = 0;
  expect_rejected(c, {"attn_scale = 0", "(0, 1024]"});
  c.attn_scale = std::nan("");
  expect_rejected(c, {"attn_scale = nan"});
  c = {};
  c.ffn_mult = 0;
  expect_rejected(c, {"ffn_mult = 0", "in [1, 64]"});
  c = {};
  c.n_layers = 0;
  expect_rejected(c, {"n_layers = 0", "in [1, 1024]"});
}

// The keys of the Llama families: each bound, and the checks across keys, in one line naming them.
TEST(ModelConfig, LlamaFamilyKeysAreCheckedAcrossKeys) {
  ModelConfig c;
  c.n_kv_heads = 3;
  expect_rejected(c, {"n_heads = 4", "not a multiple of n_kv_heads = 3"});
  c.n_kv_heads = 2;
  EXPECT_NO_THROW(c.validate());
  c = {};
  c.d_model = 130;
  c.d_head = 32;  // heads of their own width need no d_model divisible by n_heads
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.head_dim(), 32);
  c.d_head = 7;
  expect_rejected(c, {"d_head = 7", "even", "rope"});
  c = {};
  c.attn_qk_norm = c.attn_qk_rmsnorm = true;
  expect_rejected(c, {"attn_qk_norm", "attn_qk_rmsnorm"});
  c = {};
  c.ffn = FfnKind::kLearnedKv;
  c.ffn_slots = 4;
  c.intermediate_size = 100;
  expect_rejected(c, {"intermediate_size = 100", "learned_kv"});
  c = {};
  c.rope_base = 1;
  expect_rejected(c, {"rope_base = 1", "(1, "});
  c = {};
  c.norm_eps = 0;
  expect_rejected(c, {"norm_eps = 0", "(0, "});
  c = {};
  c.n_kv_heads = -1;
  expect_rejected(c, {"n_kv_heads = -1", "in [0, 1024]"});
  // the defaults are the model as it was before these keys, in its config.toml too
  const ModelConfig d;
  EXPECT_EQ(d.head_dim(), d.d_model / d.n_heads);
  EXPECT_EQ(d.kv_heads(), d.n_heads);
  EXPECT_EQ(d.rope_base, kRopeBase);
  EXPECT_EQ(d.norm_eps, kNormEps);
  const auto read = model_config_from_toml(toml::parse(
      "n_kv_heads = 2\nd_head = 16\nrope_base = 500000.0\nnorm_eps = 1e-06\nqkv_bias = true\n"
      "attn_qk_rmsnorm = true\nintermediate_size = 100\nffn = \"swiglu\"\n"));
  EXPECT_EQ(read.kv_heads(), 2);
  EXPECT_EQ(read.head_dim(), 16);
  EXPECT_EQ(read.rope_base, 500000.0);
  EXPECT_EQ(read.norm_eps, 1e-6);
  EXPECT_TRUE(read.qkv_bias && read.attn_qk_rmsnorm);
  EXPECT_EQ(read.intermediate_size, 100);
  // printed and read back, every key round trips
  std::string text;
  for (const auto& [key, literal] : model_config_items(read)) text += key + " = " + literal + "\n";
  EXPECT_EQ(model_config_items(model_config_from_toml(toml::parse(text))),
            model_config_items(read));
}

TEST(ModelConfig, EnumNamesRoundTrip) {
  for (auto v : {PosKind::kRope, PosKind::kLearned, PosKind::kNone})
    EXPECT_EQ(pos_kind_from_string(to_string(v)), v);
  for (auto v : {NormKind::kRmsNorm, NormKind::kLayerNorm})
    EXPECT_EQ(norm_kind_from_string(to_string(v)), v);
  for (auto v :
       {FfnKind::kLinear, FfnKind::kMlp, FfnKind::kGlu, FfnKind::kLearnedKv, FfnKind::kNone})
    EXPECT_EQ(ffn_kind_from_string(to_string(v)), v);
  for (auto v : {Activation::kRelu, Activation::kRelu2, Activation::kRelu3, Activation::kGelu,
                 Activation::kSilu, Activation::kGeluTanh})
    EXPECT_EQ(activation_from_string(to_string(v)), v);
  EXPECT_EQ(to_string(FfnKind::kLearnedKv), "learned_kv");
  EXPECT_EQ(to_string(NormKind::kRmsNorm), "rmsnorm");
}

TEST(ModelConfig, BadEnumNamesAreRejectedWithTheAcceptedNames) {
  try {
    ffn_kind_from_string("moe");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'moe'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("linear, mlp, glu, learned_kv, none"), std::string::npos);
  }
  try {
    model_config_from_toml(toml::parse("ffn = \"moe\""));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("or swiglu (glu with activation silu)"),
              std::string::npos);
  }
  EXPECT_THROW(pos_kind_from_string("ROPE"), std::invalid_argument);
  EXPECT_THROW(norm_kind_from_string(""), std::invalid_argument);
  EXPECT_THROW(activation_from_string("tanh"), std::invalid_argument);
}

TEST(ModelConfig, ReadsTheModelKeysOfATable) {
  auto table = toml::parse(R"(
    d_model = 64
    n_heads = 2
    pos = "learned"
    norm = "layernorm"
    ffn = "learned_kv"
    ffn_slots = 32
    tied_head = true
    attn_rule = "ssmax"
    lr = 0.1
  )");
  ModelConfig c = model_config_from_toml(table);
  EXPECT_EQ(c.d_model, 64);
  EXPECT_EQ(c.n_heads, 2);
  EXPECT_EQ(c.pos, PosKind::kLearned);
  EXPECT_EQ(c.norm, NormKind::kLayerNorm);
  EXPECT_EQ(c.ffn, FfnKind::kLearnedKv);
  EXPECT_EQ(c.ffn_slots, 32);
  EXPECT_TRUE(c.tied_head);
  EXPECT_EQ(c.attn_rule, BetaRule::kSsmax);
  EXPECT_EQ(c.vocab_size, ModelConfig{}.vocab_size);
}

// Every ffn and activation the config reads has a feed-forward name (`recall fit --kind`, inspect)
// that reads back as the same kind, and activation where the kind has one.
TEST(ModelConfig, EveryFeedForwardKindItAcceptsHasANameThatRoundTrips) {
  for (FfnKind kind : all_ffn_kinds())
    for (Activation activation : all_activations()) {
      SCOPED_TRACE(to_string(kind) + " " + to_string(activation));
      const ModelConfig c = model_config_from_toml(
          toml::parse(fmt::format("ffn = \"{}\"\nactivation = \"{}\"\nffn_slots = 8",
                                  to_string(kind), to_string(activation))));
      EXPECT_EQ(c.ffn, kind);
      EXPECT_EQ(c.activation, activation);
      if (kind == FfnKind::kNone) continue;  // no store, no name
      const auto [k, a] = feed_forward_from_name(feed_forward_name(c.ffn, c.activation));
      EXPECT_EQ(k, c.ffn);
      if (kind == FfnKind::kMlp || kind == FfnKind::kGlu) {
        EXPECT_EQ(a, c.activation);
      }
    }
}

TEST(ModelConfig, SwigluIsTheGluWithTheSiluGate) {
  ModelConfig c = model_config_from_toml(toml::parse("ffn = \"swiglu\""));
  EXPECT_EQ(c.ffn, FfnKind::kGlu);
  EXPECT_EQ(c.activation, Activation::kSilu);
  c = model_config_from_toml(toml::parse("ffn = \"swiglu\"\nactivation = \"silu\""));
  EXPECT_EQ(c.activation, Activation::kSilu);
  c = model_config_from_toml(toml::parse("ffn = \"glu\"\nactivation = \"relu2\""));
  EXPECT_EQ(c.ffn, FfnKind::kGlu);
  EXPECT_EQ(c.activation, Activation::kRelu2);
  c = model_config_from_toml(toml::parse("ffn = \"linear\"\nffn_mult = 2"));
  EXPECT_EQ(c.ffn, FfnKind::kLinear);
  // a preset's activation does not change what swiglu means
  c = model_config_from_toml(toml::parse("activation = \"gelu\"\nffn = \"swiglu\""));
  EXPECT_EQ(c.ffn, FfnKind::kGlu);
  EXPECT_EQ(c.activation, Activation::kSilu);
}

TEST(ModelConfig, TomlWrongTypesAndValuesAreRejected) {
  EXPECT_THROW(model_config_from_toml(toml::parse("d_model = \"big\"")), std::invalid_argument);
  EXPECT_THROW(model_config_from_toml(toml::parse("d_model = 1.5")), std::invalid_argument);
  EXPECT_THROW(model_config_from_toml(toml::parse("bias = 1")), std::invalid_argument);
  EXPECT_THROW(model_config_from_toml(toml::parse("pos = \"alibi\"")), std::invalid_argument);
  try {
    model_config_from_toml(toml::parse("d_model = 130"));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("d_model = 130"), std::string::npos);
  }
}

}  // namespace
}  // namespace recall
