// The exported model against an independent implementation: python/recall_model.py (PyTorch,
// written from the architecture's definition) loads `recall export`'s state dict and must give
// recall's logits on the same tokens, for every position, feed-forward and beta-rule kind.
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "model_test_util.h"
#include "python_test_util.h"
#include "recall/core/io.h"
#include "recall/core/safetensors.h"
#include "recall/train/export.h"
#include "recall/train/trainer.h"
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
      python + " '" + RECALL_SOURCE_DIR + "/tests/python/check_export.py'" + dirs;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const auto& name : names) {
    std::ifstream in(root / name / "diff.txt");
    double diff = -1;
    ASSERT_TRUE(in >> diff) << name;
    EXPECT_LT(diff, 1e-4) << name;
    EXPECT_GE(diff, 0.0) << name;
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

// What torch.load's weights_only unpickler (its default since torch 2.6) accepts: no global but
// _rebuild_tensor_v2, the storage class and OrderedDict (LibTorch's own pickler would wrap the
// dict in torch.jit._pickle.restore_type_tag).
TEST(Export, StateDictPickleNeedsOnlyTheGlobalsTorchLoadAllows) {
  Transformer model(base());
  const std::string zip = state_dict_pickle(*model);
  EXPECT_EQ(zip.find("torch.jit"), std::string::npos);
  EXPECT_EQ(zip.find("restore_type_tag"), std::string::npos);
  EXPECT_NE(zip.find("torch._utils\n_rebuild_tensor_v2"), std::string::npos);
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

}  // namespace
}  // namespace recall
