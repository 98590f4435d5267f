// The Llama families both ways: folders that transformers' save_pretrained wrote
// (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM; float32 and bfloat16, single and sharded,
// transformers 4.x's and 5.x's config keys) import with transformers' logits within 1e-4 at the
// full context; recall models of their shape export to folders that transformers loads with no
// missing or unexpected key, recall's logits and recall's greedy tokens; and every config or file
// the model cannot express is refused with one line, exit code 2 and nothing written.
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "model_test_util.h"
#include "python_test_util.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/formats/safetensors.h"
#include "recall/formats/torch_pickle.h"
#include "recall/train/export.h"
#include "recall/train/foreign_config.h"
#include "recall/train/import.h"
#include "recall/train/trainer.h"
#include "shell_test_util.h"
#include "test_paths.h"
#include "train_test_util.h"

namespace recall {
namespace {
namespace fs = std::filesystem;
using test::TempDir;

const std::string kTransformersScript =
    recall::test::source_dir() + "/tests/python/transformers_models.py";

torch::Tensor tensor_of_file(const std::string& path) {
  const PickleRef v = read_torch_file(path);
  EXPECT_EQ(v->kind, PickleValue::Kind::kTensor) << path;
  return v->tensor;
}

// Runs each line of `jobs` (transformers_models.py's arguments) in one Python process.
void run_batch(const std::string& python, const TempDir& dir, const std::string& jobs) {
  const std::string file = dir / "jobs.txt";
  test::write_text(file, jobs);
  const std::string cmd =
      python + " '" + kTransformersScript + "' batch '" + file + "' > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  return a.sizes() == b.sizes() ? (a - b).abs().max().item<double>() : 1e9;
}

TrainConfig family_task() {
  TrainConfig task;
  task.task.mqar_pairs = 2;  // the imported models are 16 to 48 positions long
  return task;
}

// Folders that transformers wrote: each family, float32 and bfloat16, single and sharded, tied and
// untied, 5.x's config keys and 4.x's (rope_theta, torch_dtype). recall's logits over a batch of 3
// prompts at the full context must be transformers' own forward's within 1e-4.
TEST(ImportGolden, LlamaFamilyFoldersGiveTransformersLogits) {
  const std::string python = test::python_with("torch, transformers");
  if (python.empty())
    GTEST_SKIP() << "no Python with torch and transformers (scripts/build_torch2.sh makes one)";
  TempDir dir;
  struct Case {
    std::string flags;
    std::function<void(const ModelConfig&)> check;
  };
  const std::vector<Case> cases = {{"--family llama",
                                    [](const ModelConfig& c) {
                                      EXPECT_EQ(c.kv_heads(), 2);
                                      EXPECT_EQ(c.intermediate_size, 72);
                                      EXPECT_EQ(c.rope_base, 500000.0);
                                      EXPECT_EQ(c.norm_eps, 1e-5);
                                      EXPECT_FALSE(c.tied_head);
                                    }},
                                   {"--family llama --bias --tied --shard --config4 --seed 1",
                                    [](const ModelConfig& c) {
                                      EXPECT_TRUE(c.bias);
                                      EXPECT_TRUE(c.tied_head);
                                    }},
                                   {"--family qwen2 --dtype bfloat16 --seed 2",
                                    [](const ModelConfig& c) {
                                      EXPECT_TRUE(c.qkv_bias);
                                      EXPECT_EQ(c.kv_heads(), 1);
                                      EXPECT_EQ(c.ffn_mult,
                                                2);  // intermediate_size 64 = 2 hidden_size
                                      EXPECT_EQ(c.norm_eps, 1e-6);
                                    }},
                                   {"--family qwen2 --shard --config4 --seed 3",
                                    [](const ModelConfig& c) { EXPECT_EQ(c.rope_base, 1e6); }},
                                   {"--family qwen3 --tied --seed 4",
                                    [](const ModelConfig& c) {
                                      EXPECT_TRUE(c.attn_qk_rmsnorm);
                                      EXPECT_EQ(c.head_dim(), 16);  // head_dim 16 apart from 32 / 4
                                      EXPECT_EQ(c.intermediate_size, 48);
                                    }},
                                   {"--family qwen3 --dtype bfloat16 --shard --seed 5",
                                    [](const ModelConfig& c) { EXPECT_EQ(c.kv_heads(), 2); }}};
  std::string jobs;
  for (size_t i = 0; i < cases.size(); ++i)
    jobs += "family '" + (dir / ("saved-" + std::to_string(i))) + "' " + cases[i].flags + "\n";
  run_batch(python, dir, jobs);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string folder = dir / ("saved-" + std::to_string(i)), flags = cases[i].flags;
    EXPECT_EQ(fs::exists(folder + "/model.safetensors.index.json"),
              flags.find("--shard") != std::string::npos)
        << flags;
    const ForeignModel m = import_model(folder, family_task(), folder + "-run");
    cases[i].check(m.config);
    Restored r = restore(folder + "-run");
    const auto tokens = tensor_of_file(folder + "/tokens.pt");
    ASSERT_EQ(tokens.size(1), m.config.seq_len) << flags;  // the full context
    torch::NoGradGuard no_grad;
    const double diff = max_diff(r.model->forward(tokens), tensor_of_file(folder + "/logits.pt"));
    EXPECT_LT(diff, 1e-4) << flags;
    std::cerr << "[ llama ] " << flags << ": max logit difference " << diff << "\n";
  }
}

// A recall model of a family's shape, away from its initialisation (unit norm gains and zero
// biases would hide a misplaced parameter), 48 positions: a prompt of 8 and 32 greedy tokens fit.
Transformer family_model(LlamaFamily f, int seed, const std::function<void(ModelConfig&)>& edit) {
  ModelConfig c = test::small_model(64, 32, 48);
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.pos = PosKind::kRope;
  c.norm = NormKind::kRmsNorm;
  c.ffn = FfnKind::kGlu;
  c.activation = Activation::kSilu;
  c.intermediate_size = 40;
  c.ffn_mult = 4;  // the default, as an import reads it: intermediate_size sets the width
  c.bias = false;
  c.tied_head = false;
  c.ffn_slots = 0;  // as recall import reads the model
  c.attn_conv = 0;
  c.attn_rule = BetaRule::kNone;
  c.rope_base = 50000.0;
  c.norm_eps = 1e-6;
  if (f == LlamaFamily::kQwen2) c.qkv_bias = true;
  if (f == LlamaFamily::kQwen3) {
    c.attn_qk_rmsnorm = true;
    c.d_head = 12;
  }
  edit(c);
  torch::manual_seed(seed);
  Transformer model(c);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.2);
  model->eval();
  return model;
}

struct FamilyCase {
  std::string name;
  LlamaFamily family;
  Transformer model;
};

std::vector<FamilyCase> family_models() {
  return {
      {"llama", LlamaFamily::kLlama, family_model(LlamaFamily::kLlama, 0, [](ModelConfig&) {})},
      {"llama-bias-tied-mha", LlamaFamily::kLlama,
       family_model(LlamaFamily::kLlama, 1,
                    [](ModelConfig& c) {
                      c.bias = true;
                      c.tied_head = true;
                      c.n_kv_heads = 0;
                      c.intermediate_size = 0;
                      c.ffn_mult = 2;
                    })},
      {"qwen2", LlamaFamily::kQwen2, family_model(LlamaFamily::kQwen2, 2, [](ModelConfig&) {})},
      {"qwen3", LlamaFamily::kQwen3, family_model(LlamaFamily::kQwen3, 3, [](ModelConfig&) {})}};
}

// recall's model of the folder DIR (recall import's reading of it), every tensor bit for bit as
// `model`'s.
void expect_family_imports_as(const fs::path& dir, const Transformer& model) {
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

TEST(ExportLlama, ImportReadsItBackBitForBit) {
  TempDir dir;
  for (const auto& [name, family, model] : family_models()) {
    const fs::path out = dir / name;
    export_llama(model, family, {}, {}, out.string());
    EXPECT_FALSE(fs::exists(out / "model.pt"));
    const auto config = nlohmann::json::parse(test::read_text((out / "config.json").string()));
    EXPECT_EQ(config["architectures"][0], llama_architecture(family)) << name;
    expect_family_imports_as(out, model);
  }
}

// Each key that a family has no place for, named in one line, and no folder made.
TEST(ExportLlama, OtherArchitecturesAreRefusedNamingTheKey) {
  TempDir dir;
  const std::vector<std::tuple<LlamaFamily, std::function<void(ModelConfig&)>, std::string>> cases =
      {{LlamaFamily::kLlama, [](ModelConfig& c) { c.norm = NormKind::kLayerNorm; },
        "norm = 'layernorm'"},
       {LlamaFamily::kLlama, [](ModelConfig& c) { c.pos = PosKind::kLearned; }, "pos = 'learned'"},
       {LlamaFamily::kLlama,
        [](ModelConfig& c) {
          c.ffn = FfnKind::kMlp;
          c.activation = Activation::kGelu;
        },
        "ffn = 'mlp'"},
       {LlamaFamily::kLlama, [](ModelConfig& c) { c.activation = Activation::kGelu; },
        "activation = 'gelu'"},
       {LlamaFamily::kLlama, [](ModelConfig& c) { c.qkv_bias = true; }, "qkv_bias = true"},
       {LlamaFamily::kQwen2, [](ModelConfig& c) { c.qkv_bias = false; }, "qkv_bias = false"},
       {LlamaFamily::kQwen3, [](ModelConfig& c) { c.bias = true; }, "bias = true"},
       {LlamaFamily::kQwen2, [](ModelConfig& c) { c.attn_qk_rmsnorm = true; },
        "attn_qk_rmsnorm = true"},
       {LlamaFamily::kLlama, [](ModelConfig& c) { c.attn_rule = BetaRule::kSu; },
        "attn_rule = 'su'"},
       {LlamaFamily::kLlama, [](ModelConfig& c) { c.attn_qk_norm = true; }, "attn_qk_norm = true"},
       {LlamaFamily::kLlama, [](ModelConfig& c) { c.attn_mem_kv = 2; }, "attn_mem_kv = 2"}};
  for (const auto& [family, edit, needle] : cases) {
    const Transformer model = family_model(family, 0, edit);
    const fs::path out = dir / "refused";
    try {
      export_llama(model, family, {}, {}, out.string());
      ADD_FAILURE() << needle << ": exported";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("--format " + to_string(family) + ": the model has " + needle),
                std::string::npos)
          << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    EXPECT_FALSE(fs::exists(out)) << needle;
  }
  // the command line: a GPT-2-shaped run, exit code 2 and one line naming the key
  const std::string run = dir / "gpt2-run";
  const test::ShellRun t = test::run_shell(
      "train --config mqar-tiny --set d_model=16 --set n_layers=1 --set n_heads=2 "
      "--set batch_size=4 --set warmup_steps=1 --set eval_batches=1 --set eval_every=0 "
      "--set checkpoint_every=0 --set steps=1 --set pos=learned --set norm=layernorm "
      "--set attn_conv=0 --quiet --out " +
      run);
  ASSERT_EQ(t.code, 0) << t.err;
  const test::ShellRun e =
      test::run_shell("export --checkpoint " + run + " --format qwen3 --out " + (dir / "q3"));
  EXPECT_EQ(e.code, 2) << e.err;
  EXPECT_NE(e.err.find("--format qwen3: the model has"), std::string::npos) << e.err;
  EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
  EXPECT_FALSE(fs::exists(dir / "q3"));
}

// The recall run of `model` (its import from a family folder), for recall sample.
std::vector<int64_t> greedy_tokens(const std::string& run, const std::string& prompt) {
  const test::ShellRun s = test::run_shell("sample --checkpoint " + run + " --prompt '" + prompt +
                                           "' --tokens 32 --temperature 0 --quiet");
  EXPECT_EQ(s.code, 0) << s.err;
  std::istringstream in(s.out);
  std::vector<int64_t> out;
  int64_t t;
  while (in >> t) out.push_back(t);
  return out;
}

// transformers' AutoModelForCausalLM.from_pretrained loads each export with no missing, unexpected
// or mismatched key and no warning, gives recall's logits within 1e-4, and greedy generate (32
// tokens) gives the tokens of recall sample --temperature 0; what its save_pretrained writes back
// imports bit for bit.
TEST(ExportLlama, TransformersLoadsItWithRecallsLogitsAndTokens) {
  const std::string python = test::python_with("torch, transformers");
  if (python.empty())
    GTEST_SKIP() << "no Python with torch and transformers (scripts/build_torch2.sh makes one)";
  TempDir dir;
  const std::string prompt = "3 1 4 1 5 9 2 6";
  const auto models = family_models();
  std::string jobs;
  torch::manual_seed(7);
  const auto tokens = torch::randint(64, {3, 48}, torch::kInt64);  // the full context
  {
    const std::vector<char> bytes = torch::pickle_save(tokens);
    std::ofstream(dir / "tokens.pt", std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  for (const auto& [name, family, model] : models) {
    export_llama(model, family, {}, {}, dir / name);
    jobs += "load '" + (dir / name) + "' '" + (dir / "tokens.pt") + "' '" + (dir / ("py-" + name)) +
            "' --generate '" + prompt + "'\n";
  }
  run_batch(python, dir, jobs);
  for (auto [name, family, model] : models) {
    torch::NoGradGuard no_grad;
    const double diff =
        max_diff(model->forward(tokens), tensor_of_file(dir / ("py-" + name) + "/logits.pt"));
    EXPECT_LT(diff, 1e-4) << name;
    std::cerr << "[ llama ] export " << name << ": max logit difference " << diff << "\n";
    expect_family_imports_as(fs::path(dir / ("py-" + name)) / "resaved", model);
    // recall sample on the imported export (the KV cache of G heads) against generate
    const std::string run = dir / ("run-" + name);
    import_model(dir / name, family_task(), run);
    std::vector<int64_t> want;
    std::istringstream in(test::read_text(dir / ("py-" + name) + "/generated.txt"));
    for (int64_t t; in >> t;) want.push_back(t);
    const std::vector<int64_t> got = greedy_tokens(run, prompt);
    ASSERT_EQ(got.size(), 8u + 32u) << name;
    EXPECT_EQ(std::vector<int64_t>(got.begin() + 8, got.end()), want) << name;
  }
}

// A valid folder to break: a Qwen3 export (grouped-query attention, q and k norms) and its config.
struct Folder {
  fs::path path;
  nlohmann::json config;
  NamedTensors tensors;
};

Folder write_family_folder(
    const fs::path& path, LlamaFamily family,
    const std::function<void(ModelConfig&)>& edit = [](ModelConfig&) {}) {
  export_llama(family_model(family, 0, edit), family, {}, {}, path.string());
  return {path, nlohmann::json::parse(test::read_text((path / "config.json").string())),
          read_safetensors(test::read_text((path / "model.safetensors").string()), "st").tensors};
}

void rewrite(const Folder& f, const nlohmann::json& config, const NamedTensors& tensors) {
  test::write_text((f.path / "config.json").string(), config.dump());
  write_file_atomic((f.path / "model.safetensors").string(),
                    safetensors_bytes(tensors, {{"format", "pt"}}));
}

// Every config or file a family model of recall cannot be made from: exit code 2, one line naming
// it, and no run folder. The folders are recall's own exports, broken one way each.
TEST(Import, LlamaFamilyFoldersRecallCannotExpressAreRefused) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> cases;  // folder, what the message names
  int n = 0;
  // a Qwen3 (or `family`) folder with config.json edited by `edit`, its tensors by `tensors`
  auto add = [&](
                 const std::string& needle, LlamaFamily family,
                 const std::function<void(nlohmann::json&)>& edit,
                 const std::function<void(NamedTensors&)>& tensors = [](NamedTensors&) {}) {
    const std::string name = "bad-" + std::to_string(n++);
    Folder f = write_family_folder(dir / name, family);
    edit(f.config);
    tensors(f.tensors);
    rewrite(f, f.config, f.tensors);
    cases.push_back({name, needle});
  };
  const auto q3 = LlamaFamily::kQwen3, llama = LlamaFamily::kLlama;
  add("rope_scaling has rope_type = \"linear\"", llama, [](nlohmann::json& c) {
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  });
  add("rope_parameters has rope_type = \"yarn\"", q3, [](nlohmann::json& c) {
    c["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e4}, {"factor", 4.0}};
  });
  add("use_sliding_window = true", q3, [](nlohmann::json& c) { c["use_sliding_window"] = true; });
  add("layer_types holds \"sliding_attention\"", q3, [](nlohmann::json& c) {
    c["layer_types"] = {"full_attention", "sliding_attention"};
  });
  add("mixture-of-experts", q3, [](nlohmann::json& c) { c["num_experts"] = 4; });
  add("holds rotary_dim, a key recall does not know", llama,
      [](nlohmann::json& c) { c["rotary_dim"] = 4; });
  add("attention_bias = true without mlp_bias", llama,
      [](nlohmann::json& c) { c["attention_bias"] = true; });
  add("hidden_act = \"gelu\"", llama, [](nlohmann::json& c) { c["hidden_act"] = "gelu"; });
  add("num_attention_heads = 4 is not a multiple of num_key_value_heads = 3", q3,
      [](nlohmann::json& c) { c["num_key_value_heads"] = 3; });
  add("lm_head.weight differs from model.embed_tokens.weight", q3,
      [](nlohmann::json& c) { c["tie_word_embeddings"] = true; });
  add(
      "holds no lm_head.weight, but tie_word_embeddings is false", llama, [](nlohmann::json&) {},
      [](NamedTensors& t) {
        t.erase(std::remove_if(t.begin(), t.end(),
                               [](const auto& p) { return p.first == "lm_head.weight"; }),
                t.end());
      });
  add("model.layers.0.mlp.gate_proj.weight has shape [40, 32]", llama,
      [](nlohmann::json& c) { c["intermediate_size"] = 48; });
  add(
      "model.layers.1.self_attn.k_norm.weight holds NaN or Inf", q3, [](nlohmann::json&) {},
      [](NamedTensors& t) {
        for (auto& [name, x] : t)
          if (name == "model.layers.1.self_attn.k_norm.weight") {
            x = x.clone();
            x[3].fill_(std::numeric_limits<float>::infinity());
          }
      });
  add("model_type = mistral", llama, [](nlohmann::json& c) { c["model_type"] = "mistral"; });
  // a sharded folder whose index names a shard that is not there
  {
    const std::string name = "bad-" + std::to_string(n++);
    Folder f = write_family_folder(dir / name, q3);
    nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", {}}};
    NamedTensors first, second;
    for (const auto& [tensor, x] : f.tensors) {
      const bool early = tensor.find("layers.1.") == std::string::npos;
      index["weight_map"][tensor] =
          early ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
      (early ? first : second).emplace_back(tensor, x);
    }
    fs::remove(f.path / "model.safetensors");
    write_file_atomic((f.path / "model-00001-of-00002.safetensors").string(),
                      safetensors_bytes(first, {{"format", "pt"}}));
    test::write_text((f.path / "model.safetensors.index.json").string(), index.dump());
    cases.push_back({name, "names shard model-00002-of-00002.safetensors"});
  }
  // in this process (a process per case would load LibTorch each time), then two on the command
  // line
  for (const auto& [from, needle] : cases) {
    try {
      import_model(dir / from, family_task(), dir / (from + "-run"));
      ADD_FAILURE() << needle << ": imported";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(needle), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  test::UsageCases usage;
  for (size_t i : {size_t{0}, cases.size() - 1})
    usage.push_back({{"import", "--from", dir / cases[i].first, "--out",
                      dir / (cases[i].first + "-run"), "--set", "mqar_pairs=2"},
                     cases[i].second});
  test::expect_usage_errors(usage, dir);
  for (const auto& [from, needle] : cases)
    EXPECT_FALSE(fs::exists(dir / (from + "-run"))) << from << ": an output folder was left";
}

// transformers 4.x's and 5.x's ways of saying the same model read as one: rope_theta or
// rope_parameters, torch_dtype or dtype, rope_scaling null, layer_types all full attention.
TEST(Import, LlamaFamilyConfigKeysOfBothTransformersVersionsReadAlike) {
  ModelConfig want;
  for (const bool five : {false, true}) {
    nlohmann::json c = {{"model_type", "qwen3"},
                        {"architectures", {"Qwen3ForCausalLM"}},
                        {"vocab_size", 64},
                        {"hidden_size", 32},
                        {"intermediate_size", 48},
                        {"num_hidden_layers", 2},
                        {"num_attention_heads", 4},
                        {"num_key_value_heads", 2},
                        {"head_dim", 16},
                        {"max_position_embeddings", 16},
                        {"rms_norm_eps", 1e-6},
                        {"tie_word_embeddings", false},
                        {"attention_bias", false},
                        {"attention_dropout", 0.0},
                        {"use_sliding_window", false},
                        {"sliding_window", nullptr},
                        {"max_window_layers", 28},
                        {"hidden_act", "silu"},
                        {"initializer_range", 0.02},
                        {"use_cache", true},
                        {"bos_token_id", nullptr},
                        {"eos_token_id", nullptr}};
    if (five) {
      c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
      c["dtype"] = "float32";
      c["layer_types"] = {"full_attention", "full_attention"};
      c["transformers_version"] = "5.25.0";
    } else {
      c["rope_theta"] = 1e6;
      c["rope_scaling"] = nullptr;
      c["torch_dtype"] = "bfloat16";
      c["transformers_version"] = "4.51.3";
    }
    const ModelConfig m = model_config_from_llama_json(c.dump(), "config.json");
    EXPECT_EQ(m.rope_base, 1e6);
    EXPECT_EQ(m.head_dim(), 16);
    EXPECT_EQ(m.kv_heads(), 2);
    EXPECT_TRUE(m.attn_qk_rmsnorm);
    if (five) {
      EXPECT_EQ(model_config_items(m), model_config_items(want));
    }
    want = m;
  }
}

}  // namespace
}  // namespace recall
