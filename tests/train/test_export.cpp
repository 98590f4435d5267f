// The exported model against an independent implementation: python/recall_model.py (PyTorch,
// written from the architecture's definition) loads `recall export`'s state dict and must give
// recall's logits on the same tokens, for every position, feed-forward and beta-rule kind. A model
// of GPT-2's architecture exported as a GPT-2 folder loads in transformers (GPT2LMHeadModel) with
// recall's logits, and recall import reads it (and transformers' own save of it) back bit for bit.
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "model_test_util.h"
#include "python_test_util.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/formats/safetensors.h"
#include "recall/formats/torch_pickle.h"
#include "recall/train/export.h"
#include "recall/train/import.h"
#include "recall/train/trainer.h"
#include "test_paths.h"
#include "train_test_util.h"

namespace recall {
namespace {
namespace fs = std::filesystem;

using test::python_with_torch;

void write_pickle(const fs::path& path, const torch::Tensor& t) {
  const std::vector<char> bytes = torch::pickle_save(t);
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Case {
  std::string name;
  ModelConfig model;
};

ModelConfig base() {
  // the tokens are 10 long: M > L = 6, where qwen and yarn differ from su and none
  return test::small_model(11, 16, 6);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](std::string name, auto edit) {
    ModelConfig c = base();
    edit(c);
    out.push_back({std::move(name), c});
  };
  for (PosKind pos : {PosKind::kRope, PosKind::kLearned, PosKind::kNone})
    add("pos_" + to_string(pos), [&](ModelConfig& c) {
      c.pos = pos;
      if (pos == PosKind::kLearned) c.seq_len = 10;
    });
  for (Activation a : {Activation::kRelu, Activation::kRelu2, Activation::kRelu3, Activation::kGelu,
                       Activation::kGeluTanh})
    add("mlp_" + to_string(a), [&](ModelConfig& c) { c.activation = a; });
  for (Activation a : {Activation::kSilu, Activation::kRelu, Activation::kRelu2, Activation::kGelu})
    add("glu_" + to_string(a), [&](ModelConfig& c) {
      c.ffn = FfnKind::kGlu;
      c.activation = a;
    });
  for (FfnKind f : {FfnKind::kLinear, FfnKind::kLearnedKv, FfnKind::kNone})
    add("ffn_" + to_string(f), [&](ModelConfig& c) { c.ffn = f; });
  for (BetaRule r : all_beta_rules())
    add("rule_" + to_string(r), [&](ModelConfig& c) { c.attn_rule = r; });
  add("conv_nopos", [](ModelConfig& c) {
    c.pos = PosKind::kNone;
    c.attn_conv = 3;
    c.attn_rule = BetaRule::kSu;
  });
  // the essay's store: unit q and k, beta fixed or learned per head, under a rule
  add("qk_norm_fixed", [](ModelConfig& c) {
    c.pos = PosKind::kNone;
    c.attn_conv = 2;
    c.attn_qk_norm = true;
    c.attn_scale = 6.0;
    c.attn_rule = BetaRule::kQwen;
    c.seq_len = 4;  // qwen differs from none past 4 of the 10 tokens
  });
  add("qk_norm_log_rule", [](ModelConfig& c) {
    c.attn_qk_norm = true;
    c.attn_scale = 6.0;
    c.attn_rule = BetaRule::log(0.4);
    c.seq_len = 4;  // log:0.4 differs from none past 4 of the 10 tokens
  });
  add("qk_norm_learned_rope_memkv_ssmax", [](ModelConfig& c) {
    c.attn_qk_norm = true;
    c.attn_scale_learned = true;
    c.attn_scale = 4.0;
    c.attn_mem_kv = 2;
    c.attn_rule = BetaRule::kSsmax;
  });
  add("layernorm_bias_tied_memkv", [](ModelConfig& c) {
    c.norm = NormKind::kLayerNorm;
    c.bias = true;
    c.tied_head = true;
    c.attn_mem_kv = 3;
    c.attn_rule = BetaRule::kYarn;
    c.attn_scale = 2.5;
  });
  // the Llama families' keys: grouped-query attention with heads of their own width, Qwen3's q
  // and k norms, Qwen2's q, k, v biases, a RoPE base, a norm eps and an FFN width of their own
  add("gqa_dhead_qk_rmsnorm_swiglu", [](ModelConfig& c) {
    c.n_kv_heads = 1;
    c.d_head = 6;
    c.attn_qk_rmsnorm = true;
    c.rope_base = 500000.0;
    c.norm_eps = 1e-6;
    c.ffn = FfnKind::kGlu;
    c.activation = Activation::kSilu;
    c.intermediate_size = 20;
  });
  add("gqa_qkv_bias_conv_memkv_rule", [](ModelConfig& c) {
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.qkv_bias = true;
    c.attn_conv = 2;
    c.attn_mem_kv = 2;
    c.attn_rule = BetaRule::kSu;
  });
  add("rmsnorm_bias_memkv_learned_kv", [](ModelConfig& c) {
    c.bias = true;
    c.attn_mem_kv = 2;
    c.ffn = FfnKind::kLearnedKv;
    c.attn_rule = BetaRule::kSsmax;
    c.attn_scale = 0.5;
  });
  return out;
}

TEST(Export, PythonReferenceGivesRecallsLogits) {
  const std::string python = python_with_torch();
  if (python.empty()) GTEST_SKIP() << "no Python with torch (install python3-torch)";
  const fs::path root = fs::temp_directory_path() / "recall_export_golden";
  fs::remove_all(root);
  std::string dirs;
  const auto all = cases();
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& [name, mc] = all[i];
    torch::manual_seed(i);
    Transformer model(mc);
    {
      // Away from the initialisation: unit norm gains, zero biases and the initial ssmax scale
      // would hide a missing or misplaced parameter.
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.2);
    }
    model->eval();
    TrainConfig tc;
    tc.model = mc;
    const fs::path dir = root / name;
    export_model(model, tc, 0, {}, dir.string());
    auto tokens = torch::randint(mc.vocab_size, {2, 10}, torch::kInt64);
    torch::NoGradGuard no_grad;
    write_pickle(dir / "tokens.pt", tokens);
    write_pickle(dir / "logits.pt", model->forward(tokens));
    dirs += " '" + dir.string() + "'";
  }
  // The last case again as exported when the blocks were named block0., block1., ...
  std::vector<std::string> names;
  for (const auto& c : all) names.push_back(c.name);
  names.push_back(all.back().name + "_old_names");
  const fs::path old = root / names.back();
  fs::copy(root / all.back().name, old);
  NamedTensors state =
      read_safetensors(test::read_text((old / "model.safetensors").string()), "model.safetensors")
          .tensors;
  for (auto& [name, t] : state)
    if (name.rfind("blocks.", 0) == 0) {
      const size_t dot = name.find('.', 7);  // blocks.i.rest -> blocki.rest
      name = "block" + name.substr(7, dot - 7) + name.substr(dot);
    }
  write_file_atomic((old / "model.pt").string(), state_dict_pickle(state));
  write_file_atomic((old / "model.safetensors").string(),
                    safetensors_bytes(state, {{"format", "pt"}}));
  dirs += " '" + old.string() + "'";
  const std::string cmd =
      python + " '" + recall::test::source_dir() + "/tests/python/check_export.py'" + dirs;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const auto& name : names) {
    std::ifstream in(root / name / "diff.txt");
    double diff = -1;
    ASSERT_TRUE(in >> diff) << name;
    EXPECT_LT(diff, 1e-4) << name;
    EXPECT_GE(diff, 0.0) << name;
    // model.pt's pickle, read opcode by opcode in Python: exactly the globals of a float32 state
    // dict, none of which torch.load's weights_only unpickler (its default since 2.6) refuses
    EXPECT_EQ(test::read_text((root / name / "globals.txt").string()),
              "collections.OrderedDict\ntorch.FloatStorage\ntorch._utils._rebuild_tensor_v2\n")
        << name;
  }
}

TEST(Export, ConfigJsonNamesTheModel) {
  ModelConfig mc = base();
  mc.ffn = FfnKind::kGlu;
  mc.activation = Activation::kSilu;
  TrainConfig tc;
  tc.model = mc;
  const fs::path dir = fs::temp_directory_path() / "recall_export_config";
  fs::remove_all(dir);
  export_model(Transformer(mc), tc, 7, {}, dir.string());
  std::ifstream in(dir / "config.json");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  for (const char* needle : {"\"ffn\": \"glu\"", "\"activation\": \"silu\"", "\"step\": 7",
                             "\"pos\": \"rope\"", "\"d_model\": 16"})
    EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
  EXPECT_GT(fs::file_size(dir / "model.pt"), 1000u);
}

// The pickle's globals are checked in Python (PythonReferenceGivesRecallsLogits); here, the state
// dict reads back in LibTorch.
TEST(Export, StateDictPickleReadsBackInLibTorch) {
  Transformer model(base());
  const std::string zip = state_dict_pickle(*model);
  // It reads back in LibTorch, name for name and bit for bit.
  const auto state = named_state(*model);
  // block i's tensors under blocks.i., as in the activation cache; the head mask is no weight
  EXPECT_EQ(state.at(1).first, "blocks.0.norm1.weight");
  for (const auto& [name, t] : state) EXPECT_EQ(name.find("head_mask"), std::string::npos) << name;
  const auto dict = torch::pickle_load(std::vector<char>(zip.begin(), zip.end())).toGenericDict();
  ASSERT_EQ(dict.size(), state.size());
  for (const auto& [name, t] : state)
    EXPECT_TRUE(torch::equal(dict.at(name).toTensor(), t)) << name;
}

TEST(Export, SafetensorsHoldTheStateDict) {
  ModelConfig mc = base();
  mc.norm = NormKind::kLayerNorm;
  mc.bias = true;
  TrainConfig tc;
  tc.model = mc;
  const fs::path dir = fs::temp_directory_path() / "recall_export_safetensors";
  fs::remove_all(dir);
  Transformer model(mc);
  export_model(model, tc, 0, {}, dir.string());
  std::ifstream in(dir / "model.safetensors", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const auto file = read_safetensors(bytes, "model.safetensors");
  const auto state = named_state(*model);
  ASSERT_EQ(file.tensors.size(), state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(file.tensors[i].first, state[i].first);
    EXPECT_TRUE(torch::equal(file.tensors[i].second, state[i].second)) << state[i].first;
  }
  EXPECT_EQ(file.metadata.at("format"), "pt");
}

// A model of GPT-2's architecture (12 positions), away from its initialisation: unit norm gains and
// zero biases would hide a misplaced parameter.
Transformer gpt2_model(bool tied, Activation activation, int64_t ffn_mult, int seed) {
  ModelConfig c = test::small_model(40, 32, 12);
  c.n_heads = 4;
  c.pos = PosKind::kLearned;
  c.norm = NormKind::kLayerNorm;
  c.bias = true;
  c.tied_head = tied;
  c.activation = activation;
  c.ffn_mult = ffn_mult;
  c.ffn_slots = 0;  // as recall import reads a GPT-2 model
  torch::manual_seed(seed);
  Transformer model(c);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.2);
  model->eval();
  return model;
}

std::vector<Transformer> gpt2_models() {
  return {gpt2_model(true, Activation::kGeluTanh, 4, 0), gpt2_model(false, Activation::kGelu, 4, 1),
          gpt2_model(false, Activation::kGeluTanh, 2, 2)};
}

// recall's model of the GPT-2 folder DIR (recall import's reading of it), every tensor bit for bit
// as `model`'s.
void expect_imports_as(const fs::path& dir, const Transformer& model) {
  ForeignModel m = read_foreign_model(dir.string());
  EXPECT_EQ(model_config_items(m.config), model_config_items(model->config)) << dir;
  const Transformer back = build_foreign_model(m);
  const auto want = named_state(*model), got = named_state(*back);
  ASSERT_EQ(got.size(), want.size()) << dir;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << dir;
    EXPECT_TRUE(torch::equal(got[i].second, want[i].second)) << dir << ": " << want[i].first;
  }
}

TEST(ExportGpt2, ImportReadsItBackBitForBit) {
  test::TempDir dir;
  int i = 0;
  for (const auto& model : gpt2_models()) {
    const fs::path out = dir / ("gpt2-" + std::to_string(i++));
    export_gpt2(model, {}, {}, out.string());
    EXPECT_FALSE(fs::exists(out / "model.pt"));
    expect_imports_as(out, model);
  }
}

// Each key that GPT-2 has no place for, named in one line, and no folder made.
TEST(ExportGpt2, OtherArchitecturesAreRefusedNamingTheKey) {
  test::TempDir dir;
  const std::vector<std::pair<std::function<void(ModelConfig&)>, std::string>> cases = {
      {[](ModelConfig& c) { c.pos = PosKind::kRope; }, "pos = 'rope'"},
      {[](ModelConfig& c) { c.norm = NormKind::kRmsNorm; }, "norm = 'rmsnorm'"},
      {[](ModelConfig& c) { c.bias = false; }, "bias = false"},
      {[](ModelConfig& c) { c.activation = Activation::kRelu; }, "activation = 'relu'"},
      {[](ModelConfig& c) { c.ffn = FfnKind::kGlu; }, "ffn = 'glu'"},
      {[](ModelConfig& c) { c.attn_rule = BetaRule::kSu; }, "attn_rule = 'su'"},
      {[](ModelConfig& c) { c.attn_scale = 0.5; }, "attn_scale = 0.5"},
      {[](ModelConfig& c) { c.attn_mem_kv = 2; }, "attn_mem_kv = 2"},
      {[](ModelConfig& c) { c.attn_conv = 2; }, "attn_conv = 2"},
      {[](ModelConfig& c) { c.attn_qk_norm = true; }, "attn_qk_norm = true"}};
  for (const auto& [edit, needle] : cases) {
    ModelConfig c = gpt2_model(true, Activation::kGelu, 4, 0)->config;
    edit(c);
    const fs::path out = dir / "refused";
    try {
      export_gpt2(Transformer(c), {}, {}, out.string());
      ADD_FAILURE() << needle << ": exported";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("--format gpt2: the model has " + needle), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    EXPECT_FALSE(fs::exists(out)) << needle;
  }
}

// transformers' GPT2LMHeadModel.from_pretrained loads the export with no missing, unexpected or
// mismatched key and no warning, gives recall's logits within 1e-4, and what its save_pretrained
// writes back imports bit for bit.
TEST(ExportGpt2, TransformersLoadsItWithRecallsLogits) {
  const std::string python = test::python_with("torch, transformers");
  if (python.empty())
    GTEST_SKIP() << "no Python with torch and transformers (scripts/build_torch2.sh makes one)";
  test::TempDir dir;
  int i = 0;
  for (auto model : gpt2_models()) {
    const fs::path out = dir / ("gpt2-" + std::to_string(i)),
                   py = dir / ("py-" + std::to_string(i));
    ++i;
    export_gpt2(model, {}, {}, out.string());
    torch::manual_seed(i);
    const auto tokens = torch::randint(model->config.vocab_size, {2, 12}, torch::kInt64);
    write_pickle(dir / "tokens.pt", tokens);
    const std::string cmd = python + " '" + recall::test::source_dir() +
                            "/tests/python/transformers_models.py' load '" + out.string() + "' '" +
                            dir / "tokens.pt" + "' '" + py.string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const PickleRef logits = read_torch_file((py / "logits.pt").string());
    ASSERT_EQ(logits->kind, PickleValue::Kind::kTensor);
    torch::NoGradGuard no_grad;
    const auto want = model->forward(tokens);
    ASSERT_EQ(logits->tensor.sizes(), want.sizes());
    EXPECT_LT((logits->tensor - want).abs().max().item<double>(), 1e-4) << out;
    expect_imports_as(py / "resaved", model);
  }
}

}  // namespace
}  // namespace recall
