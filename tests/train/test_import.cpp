// recall import against models written by other programs: a GPT-2-format folder written by a Python
// script (random weights under GPT-2's names and layouts, safetensors by the format's rules, or
// torch.save's pytorch_model.bin) and a nanoGPT checkpoint of a model scripts/peer_gpt.py trained.
// Their logits come from a forward pass written in Python from GPT-2's definition
// (tests/python/foreign_models.py); recall's must agree within 1e-4, and export must hand back the
// file's tensors bit for bit. Bad files must be refused with exit code 2 and one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "python_test_util.h"
#include "recall/core/error.h"
#include "recall/core/safetensors.h"
#include "recall/core/torch_pickle.h"
#include "recall/train/export.h"
#include "recall/train/import.h"
#include "recall/train/trainer.h"
#include "train_test_util.h"

namespace recall {
namespace {
namespace fs = std::filesystem;
using test::python_with_torch;
using test::TempDir;

const std::string kScript = std::string(RECALL_SOURCE_DIR) + "/tests/python/foreign_models.py";

void run(const std::string& cmd) {
  ASSERT_EQ(std::system((cmd + " > /dev/null").c_str()), 0) << cmd;
}

torch::Tensor load_tensor(const std::string& path) {
  const PickleRef v = read_torch_file(path);
  EXPECT_EQ(v->kind, PickleValue::Kind::kTensor) << path;
  return v->tensor;
}

// recall's logits on the golden tokens against the Python forward's, and the export round trip.
void expect_golden(const std::string& python, const std::string& source, const std::string& ref,
                   const std::string& run_dir, const std::string& name) {
  Restored r = restore(run_dir);
  const auto tokens = load_tensor(ref + "/tokens.pt");
  const auto want = load_tensor(ref + "/logits.pt");
  torch::NoGradGuard no_grad;
  const auto got = r.model->forward(tokens);
  ASSERT_EQ(got.sizes(), want.sizes()) << name;
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-4) << name;
  const std::string exported = run_dir + "-export";
  export_checkpoint(run_dir, exported);
  run(python + " '" + kScript + "' compare '" + source + "' '" + exported + "' '" + ref + "'");
  const auto c = nlohmann::json::parse(test::read_text(exported + "/compare.json"));
  EXPECT_LT(c["max_logit_diff"].get<double>(), 1e-4) << name;
  EXPECT_TRUE(c["exact"].get<bool>()) << name << ": the exported tensors differ from the file's";
}

TEST(ImportGolden, Gpt2FolderGivesPyTorchsLogits) {
  const std::string python = python_with_torch();
  if (python.empty()) GTEST_SKIP() << "no Python with torch (install python3-torch)";
  TempDir dir;
  TrainConfig task;
  task.task.mqar_pairs = 2;  // the models are 12 positions long
  const std::tuple<std::string, Activation, bool> cases[] = {
      {"--activation gelu_new", Activation::kGeluTanh, true},
      {"--activation gelu --untied", Activation::kGelu, false},
      {"--weights bin --seed 3", Activation::kGeluTanh, true},
      {"--weights bin --untied --activation gelu_pytorch_tanh --seed 4", Activation::kGeluTanh,
       false}};
  int i = 0;
  for (const auto& [flags, activation, tied] : cases) {
    const std::string folder = dir / ("gpt2-" + std::to_string(i++));
    run(python + " '" + kScript + "' gpt2 '" + folder + "' " + flags);
    const ForeignModel m = import_model(folder, task, folder + "-run");
    EXPECT_EQ(m.config.tied_head, tied) << flags;
    EXPECT_EQ(m.config.activation, activation) << flags;
    expect_golden(python, folder, folder, folder + "-run", flags);
  }
}

TEST(ImportGolden, PeerGptCheckpointGivesPyTorchsLogits) {
  const std::string python = python_with_torch();
  if (python.empty()) GTEST_SKIP() << "no Python with torch (install python3-torch)";
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the cat sat on the mat " + std::to_string(i % 7) + ".\n";
  test::write_text(dir / "corpus.txt", text);
  test::write_text(dir / "tiny.toml",
                   "task = \"text\"\ntext_file = \"corpus.txt\"\nseq_len = 16\nd_model = 16\n"
                   "n_layers = 2\nn_heads = 2\npos = \"learned\"\nnorm = \"layernorm\"\n"
                   "bias = true\ntied_head = false\nffn = \"mlp\"\nactivation = \"gelu\"\n"
                   "steps = 30\nbatch_size = 4\nwarmup_steps = 2\neval_batches = 1\n");
  const std::string ckpt = dir / "ckpt.pt";
  run(python + " '" + RECALL_SOURCE_DIR + "/scripts/peer_gpt.py' --config '" + (dir / "tiny.toml") +
      "' --threads 1 --save '" + ckpt + "'");
  run(python + " '" + kScript + "' nanogpt '" + ckpt + "' '" + (dir / "ref") + "' --compiled '" +
      (dir / "compiled.pt") + "'");
  const TrainConfig task = train_config_from_file(dir / "tiny.toml");
  const ForeignModel m = import_model(ckpt, task, dir / "run");
  EXPECT_FALSE(m.config.tied_head);  // peer_gpt's head is its own
  EXPECT_EQ(m.step, 30);
  const Restored r = restore(dir / "run");
  EXPECT_EQ(r.config.task.kind, TaskKind::kText);
  EXPECT_EQ(static_cast<int64_t>(r.vocabulary.size()), m.config.vocab_size);
  expect_golden(python, ckpt, dir / "ref", dir / "run", "peer_gpt");
  // nanoGPT's own way: torch.compile's prefixes and the head tied to wte (one storage)
  const ForeignModel c = import_model(dir / "compiled.pt", task, dir / "run-compiled");
  EXPECT_TRUE(c.config.tied_head);
  expect_golden(python, dir / "compiled.pt", dir / "ref/compiled", dir / "run-compiled",
                "compiled");
}

// A GPT-2-format model written here: GPT-2's names and layouts (Conv1D weights (in, out)).
NamedTensors gpt2_tensors(int64_t V, int64_t D, int64_t L, int64_t P) {
  torch::manual_seed(0);
  auto r = [](std::vector<int64_t> shape) { return torch::randn(shape) * 0.2; };
  NamedTensors t = {{"wte.weight", r({V, D})}, {"wpe.weight", r({P, D})}};
  for (int64_t i = 0; i < L; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    for (const char* ln : {"ln_1", "ln_2"}) {
      t.emplace_back(h + ln + ".weight", 1 + r({D}));
      t.emplace_back(h + ln + ".bias", r({D}));
    }
    for (auto [name, in, out] : {std::tuple{"attn.c_attn", D, 3 * D},
                                 {"attn.c_proj", D, D},
                                 {"mlp.c_fc", D, 4 * D},
                                 {"mlp.c_proj", 4 * D, D}}) {
      t.emplace_back(h + name + ".weight", r({in, out}));
      t.emplace_back(h + name + ".bias", r({out}));
    }
  }
  t.emplace_back("ln_f.weight", 1 + r({D}));
  t.emplace_back("ln_f.bias", r({D}));
  return t;
}

nlohmann::json gpt2_config(int64_t V, int64_t D, int64_t L, int64_t P) {
  return {{"model_type", "gpt2"},
          {"vocab_size", V},
          {"n_embd", D},
          {"n_layer", L},
          {"n_head", 2},
          {"n_positions", P},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5}};
}

void write_folder(const std::string& dir, const nlohmann::json& config, const std::string& weights,
                  const std::string& file = "model.safetensors") {
  fs::create_directories(dir);
  test::write_text(dir + "/config.json", config.dump());
  test::write_text(dir + "/" + file, weights);
}

// nanoGPT's ckpt.pt: {"model_args": {...}, "model": {...}, "iter_num": 3}, in torch.save's format.
std::string nanogpt_bytes(const std::map<std::string, c10::IValue>& args,
                          const NamedTensors& tensors) {
  c10::impl::GenericDict a(c10::StringType::get(), c10::AnyType::get());
  for (const auto& [k, v] : args) a.insert(k, v);
  c10::impl::GenericDict model(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, t] : tensors) {
    const bool conv =
        name.find(".c_") != std::string::npos && name.find(".weight") != std::string::npos;
    model.insert("transformer." + name, conv ? t.t().contiguous() : t);
  }
  c10::impl::GenericDict ckpt(c10::StringType::get(), c10::AnyType::get());
  ckpt.insert("model_args", a);
  ckpt.insert("model", model);
  ckpt.insert("iter_num", int64_t{3});
  return torch_save_bytes(ckpt);
}

TEST(Import, BadFilesAreRefusedWithOneLine) {
  TempDir dir;
  const int64_t V = 19, D = 8, L = 1, P = 8;
  const auto tensors = gpt2_tensors(V, D, L, P);
  const std::string good = safetensors_bytes(tensors);
  write_folder(dir / "good", gpt2_config(V, D, L, P), good);
  const std::vector<std::string> task = {"--set", "mqar_pairs=2"};
  auto import_args = [&](const std::string& from, const std::string& out) {
    std::vector<std::string> a = {"import", "--from", from, "--out", dir / out};
    a.insert(a.end(), task.begin(), task.end());
    return a;
  };
  ASSERT_EQ(test::run_cli(import_args(dir / "good", "good-run"), dir).code, 0);
  const std::map<std::string, c10::IValue> args = {{"n_layer", int64_t{L}},
                                                   {"n_head", int64_t{2}},
                                                   {"n_embd", int64_t{D}},
                                                   {"block_size", int64_t{P}},
                                                   {"vocab_size", int64_t{V}},
                                                   {"bias", true},
                                                   {"dropout", 0.0}};
  test::write_text(dir / "ckpt.pt", nanogpt_bytes(args, tensors));
  ASSERT_EQ(test::run_cli(import_args(dir / "ckpt.pt", "ckpt-run"), dir).code, 0);

  // safetensors: cut short, a header length past the end, offsets that lie, a bad header
  write_folder(dir / "truncated", gpt2_config(V, D, L, P), good.substr(0, good.size() / 2));
  std::string long_header = good;
  long_header[5] = '\x7f';
  write_folder(dir / "long-header", gpt2_config(V, D, L, P), long_header);
  const uint64_t n = *reinterpret_cast<const uint64_t*>(good.data());
  auto with_header = [&](const std::string& from, const std::string& to) {
    std::string h = good.substr(8, n);
    const auto at = h.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    h.replace(at, from.size(), to);
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xFF);
    return out + h + good.substr(8 + n);
  };
  const auto wte = nlohmann::json::parse(good.substr(8, n))["wte.weight"]["data_offsets"];
  const std::string wte_offsets = wte.dump();
  const auto end = wte[1].get<uint64_t>();
  write_folder(dir / "past-end", gpt2_config(V, D, L, P),
               with_header(wte_offsets, fmt::format("[0,{}]", good.size() * 4)));
  write_folder(dir / "shape-lie", gpt2_config(V, D, L, P),
               with_header(wte_offsets, fmt::format("[0,{}]", end - 4)));
  write_folder(dir / "not-json", gpt2_config(V, D, L, P), with_header("{", "["));
  // a wrong-shaped tensor, an unknown architecture key, an unreadable value
  auto wrong = tensors;
  for (auto& [name, t] : wrong)
    if (name == "h.0.mlp.c_fc.weight") t = torch::randn({D, 3 * D});
  write_folder(dir / "wrong-shape", gpt2_config(V, D, L, P), safetensors_bytes(wrong));
  auto rotary = gpt2_config(V, D, L, P);
  rotary["rotary_dim"] = 4;
  write_folder(dir / "unknown-key", rotary, good);
  auto relu = gpt2_config(V, D, L, P);
  relu["activation_function"] = "relu";
  write_folder(dir / "relu", relu, good);
  auto extra = tensors;
  extra.emplace_back("h.0.attn.q_norm.weight", torch::ones({D}));
  write_folder(dir / "extra", gpt2_config(V, D, L, P), safetensors_bytes(extra));
  auto f64 = tensors;
  f64[0].second = f64[0].second.to(torch::kFloat64);
  write_folder(dir / "f64", gpt2_config(V, D, L, P), safetensors_bytes(f64));
  // nanoGPT: cut short, not a zip, an unknown model_args key, a missing tensor
  const std::string ckpt = nanogpt_bytes(args, tensors);
  test::write_text(dir / "short.pt", ckpt.substr(0, ckpt.size() / 2));
  test::write_text(dir / "legacy.pt", std::string("\x80\x02\x8a\x0a", 4) + "junk");
  auto gqa = args;
  gqa["n_kv_head"] = int64_t{1};
  test::write_text(dir / "gqa.pt", nanogpt_bytes(gqa, tensors));
  auto missing = tensors;
  missing.pop_back();
  test::write_text(dir / "missing.pt", nanogpt_bytes(args, missing));
  std::string flipped = ckpt;
  const auto pkl = flipped.find("model_args");
  ASSERT_NE(pkl, std::string::npos);
  flipped[pkl - 3] = '\xff';  // an opcode argument of the pickle
  test::write_text(dir / "flipped.pt", flipped);

  test::UsageCases cases;
  auto add = [&](const std::string& from, const std::string& needle) {
    cases.push_back({import_args(dir / from, from + "-run"), needle});
  };
  add("truncated", "data section");
  add("long-header", "runs past the end");
  add("past-end", "outside the data section");
  add("shape-lie", "shape and dtype need");
  add("not-json", "not a JSON object");
  add("wrong-shape", "h.0.mlp.c_fc.weight has shape [8, 24]");
  add("unknown-key", "rotary_dim");
  add("relu", "activation_function = relu");
  add("extra", "h.0.attn.q_norm.weight has no place");
  add("f64", "dtype Double");
  add("short.pt", "not a readable torch.save archive");
  add("legacy.pt", "not a torch.save file");
  add("gqa.pt", "n_kv_head");
  add("missing.pt", "lacks tensor ln_f.bias");
  add("flipped.pt", "flipped.pt");
  add("none", "no such file");
  cases.push_back({{"import", "--from", dir / "good", "--out", dir / "x", "--set", "d_model=4"},
                   "d_model is a model key"});
  test::expect_usage_errors(cases, dir);
  // an imported run has no optimizer state to resume
  const auto resume = test::run_cli(
      {"train", "--config", dir / "good-run/config.toml", "--out", dir / "good-run", "--resume"},
      dir);
  EXPECT_EQ(resume.code, 2);
  EXPECT_NE(resume.err.find("holds no optimizer state"), std::string::npos) << resume.err;
}

TEST(Import, SafetensorsReaderRefusesOverlapsAndHoles) {
  const std::string bytes =
      safetensors_bytes({{"a", torch::ones({2})}, {"b", torch::zeros({3})}}, {{"k", "v"}});
  const auto ok = read_safetensors(bytes, "ok");
  ASSERT_EQ(ok.tensors.size(), 2u);
  EXPECT_TRUE(torch::equal(ok.tensors[1].second, torch::zeros({3})));
  EXPECT_EQ(ok.metadata.at("k"), "v");
  auto with = [&](const std::string& header) {
    std::string h = header;
    h.append((8 - h.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xFF);
    return out + h + std::string(20, '\0');
  };
  const std::pair<std::string, std::string> bad[] = {
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})",
       "overlap"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
       "hole"},
      {R"({"a":{"dtype":"F32","shape":[5],"data_offsets":[0,20]},"__metadata__":{"k":1}})",
       "not a string"},
      {R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,20]}})",
       "overflows"},
      {R"({"a":{"dtype":"Q4","shape":[5],"data_offsets":[0,20]}})", "dtype \"Q4\""},
      {R"({"a":{"dtype":"F32","shape":[5],"data_offsets":[20,0]}})", "outside"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "cover 16 of the 20"}};
  for (const auto& [header, needle] : bad) {
    try {
      read_safetensors(with(header), "bad");
      ADD_FAILURE() << "accepted " << header;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace recall
