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
