// recall import against models written by other programs: a GPT-2-format folder written by a Python
// script (random weights under GPT-2's names and layouts, safetensors by the format's rules, or
// torch.save's pytorch_model.bin) and a nanoGPT checkpoint of a model scripts/peer_gpt.py trained.
// Their logits come from a forward pass written in Python from GPT-2's definition
// (tests/python/foreign_models.py); recall's must agree within 1e-4, and export must hand back the
// file's tensors bit for bit. Bad files must be refused with exit code 2 and one line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "python_test_util.h"
#include "recall/core/error.h"
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
using test::TempDir;

const std::string kScript = recall::test::source_dir() + "/tests/python/foreign_models.py";

void run(const std::string& cmd) {
  ASSERT_EQ(std::system((cmd + " > /dev/null").c_str()), 0) << cmd;
}

torch::Tensor load_tensor(const std::string& path) {
  const PickleRef v = read_torch_file(path);
  EXPECT_EQ(v->kind, PickleValue::Kind::kTensor) << path;
  return v->tensor;
}

// The imported run's logits on REF/tokens.pt against REF/logits.pt, within 1e-4.
void expect_logits(const std::string& run_dir, const std::string& ref, const std::string& name) {
  Restored r = restore(run_dir);
  const auto tokens = load_tensor(ref + "/tokens.pt");
  const auto want = load_tensor(ref + "/logits.pt");
  torch::NoGradGuard no_grad;
  const auto got = r.model->forward(tokens);
  ASSERT_EQ(got.sizes(), want.sizes()) << name;
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-4) << name;
}

// recall's logits on the golden tokens against the Python forward's, and the export round trip.
void expect_golden(const std::string& python, const std::string& source, const std::string& ref,
                   const std::string& run_dir, const std::string& name) {
  expect_logits(run_dir, ref, name);
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
       false},
      // half-precision weights as transformers saves them, under 4.x's and 5.x's config keys
      {"--dtype float16 --seed 5", Activation::kGeluTanh, true},
      {"--dtype float16 --weights bin --transformers 5 --seed 6", Activation::kGeluTanh, true},
      {"--dtype bfloat16 --transformers 5 --untied --seed 7", Activation::kGeluTanh, false},
      {"--dtype bfloat16 --weights bin --activation gelu --seed 8", Activation::kGelu, true}};
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
  run(python + " '" + recall::test::source_dir() + "/scripts/peer_gpt.py' --config '" +
      (dir / "tiny.toml") + "' --threads 1 --save '" + ckpt + "'");
  run(python + " '" + kScript + "' nanogpt '" + ckpt + "' '" + (dir / "ref") + "' --compiled '" +
      (dir / "compiled.pt") + "'");
  // nanoGPT's own checkpoint: the optimizer's state beside the model, passed over on import
  const PickleRef saved = read_torch_file(ckpt);
  ASSERT_NE(saved->get("optimizer"), nullptr);
  ASSERT_NE(saved->get("optimizer")->get("state"), nullptr);
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

// Folders that transformers' save_pretrained wrote: float32, float16 and bfloat16 weights, tied and
// untied heads, single and sharded safetensors. recall's logits must be transformers' own forward's
// (of the saved weights, widened to float32) within 1e-4.
TEST(ImportGolden, TransformersFoldersGiveTransformersLogits) {
  const std::string python = test::python_with("torch, transformers");
  if (python.empty())
    GTEST_SKIP() << "no Python with torch and transformers (scripts/build_torch2.sh makes one)";
  TempDir dir;
  TrainConfig task;
  task.task.mqar_pairs = 2;  // the models are 12 positions long
  const std::pair<std::string, bool> cases[] = {{"", true},
                                                {"--untied --activation gelu --seed 1", false},
                                                {"--dtype bfloat16 --untied --seed 2", false},
                                                {"--dtype float16 --shard --seed 3", true},
                                                {"--shard --untied --seed 4", false},
                                                {"--dtype bfloat16 --shard --seed 5", true}};
  int i = 0;
  for (const auto& [flags, tied] : cases) {
    const std::string folder = dir / ("saved-" + std::to_string(i++));
    run(python + " '" + recall::test::source_dir() +
        "/tests/python/transformers_models.py' save '" + folder + "' " + flags);
    EXPECT_EQ(fs::exists(folder + "/model.safetensors.index.json"),
              flags.find("--shard") != std::string::npos)
        << flags;
    const ForeignModel m = import_model(folder, task, folder + "-run");
    EXPECT_EQ(m.config.tied_head, tied) << flags;
    expect_logits(folder + "-run", folder, flags);
  }
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

// A state dict as torch.save holds it, under GPT-2's LM head model's names ("transformer.h.0...");
// with `linear`, the Conv1D weights in torch.nn.Linear's (out, in) layout, as nanoGPT holds them.
c10::impl::GenericDict state_dict(const NamedTensors& tensors, bool linear) {
  c10::impl::GenericDict model(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, t] : tensors) {
    const bool conv = linear && name.find(".c_") != std::string::npos &&
                      name.find(".weight") != std::string::npos;
    model.insert("transformer." + name, conv ? t.t().contiguous() : t);
  }
  return model;
}

// nanoGPT's ckpt.pt: {"model_args": {...}, "model": {...}, "iter_num": 3}, in torch.save's format.
std::string nanogpt_bytes(const std::map<std::string, c10::IValue>& args,
                          const NamedTensors& tensors) {
  c10::impl::GenericDict a(c10::StringType::get(), c10::AnyType::get());
  for (const auto& [k, v] : args) a.insert(k, v);
  c10::impl::GenericDict ckpt(c10::StringType::get(), c10::AnyType::get());
  ckpt.insert("model_args", a);
  ckpt.insert("model", state_dict(tensors, true));
  ckpt.insert("iter_num", int64_t{3});
  return torch_save_bytes(ckpt);
}

// recall import's command line for FROM into DIR/OUT (the models here are 8 positions long).
std::vector<std::string> import_args(const TempDir& dir, const std::string& from,
                                     const std::string& out) {
  return {"import", "--from", from, "--out", dir / out, "--set", "mqar_pairs=2"};
}

// Each case must be refused on the command line (exit code 2, one line naming it) and leave no
// run folder behind.
void expect_refused_leaving_nothing(const TempDir& dir,
                                    const std::vector<std::pair<std::string, std::string>>& cases) {
  test::UsageCases usage;
  for (const auto& [from, needle] : cases)
    usage.push_back({import_args(dir, dir / from, from + "-run"), needle});
  test::expect_usage_errors(usage, dir);
  for (const auto& [from, needle] : cases)
    EXPECT_FALSE(fs::exists(dir / (from + "-run"))) << from << ": an output folder was left";
}

TEST(Import, BadFilesAreRefusedWithOneLine) {
  TempDir dir;
  const int64_t V = 19, D = 8, L = 1, P = 8;
  const auto tensors = gpt2_tensors(V, D, L, P);
  const std::string good = safetensors_bytes(tensors);
  write_folder(dir / "good", gpt2_config(V, D, L, P), good);
  ASSERT_EQ(test::run_cli(import_args(dir, dir / "good", "good-run"), dir).code, 0);
  const std::map<std::string, c10::IValue> args = {{"n_layer", int64_t{L}},
                                                   {"n_head", int64_t{2}},
                                                   {"n_embd", int64_t{D}},
                                                   {"block_size", int64_t{P}},
                                                   {"vocab_size", int64_t{V}},
                                                   {"bias", true},
                                                   {"dropout", 0.0}};
  test::write_text(dir / "ckpt.pt", nanogpt_bytes(args, tensors));
  ASSERT_EQ(test::run_cli(import_args(dir, dir / "ckpt.pt", "ckpt-run"), dir).code, 0);

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

  expect_refused_leaving_nothing(dir, {{"truncated", "data section"},
                                       {"long-header", "runs past the end"},
                                       {"past-end", "outside the data section"},
                                       {"shape-lie", "shape and dtype need"},
                                       {"not-json", "not a JSON object"},
                                       {"wrong-shape", "h.0.mlp.c_fc.weight has shape [8, 24]"},
                                       {"unknown-key", "rotary_dim"},
                                       {"relu", "activation_function = relu"},
                                       {"extra", "h.0.attn.q_norm.weight has no place"},
                                       {"f64", "dtype Double"},
                                       {"short.pt", "not a readable torch.save archive"},
                                       {"legacy.pt", "not a torch.save file"},
                                       {"gqa.pt", "n_kv_head"},
                                       {"missing.pt", "lacks tensor ln_f.bias"},
                                       {"flipped.pt", "flipped.pt"},
                                       {"none", "no such file"}});
  test::expect_usage_errors(
      {{{"import", "--from", dir / "good", "--out", dir / "x", "--set", "d_model=4"},
        "d_model is a model key"}},
      dir);
  // an imported run has no optimizer state to resume
  const auto resume = test::run_cli(
      {"train", "--config", dir / "good-run/config.toml", "--out", dir / "good-run", "--resume"},
      dir);
  EXPECT_EQ(resume.code, 2);
  EXPECT_NE(resume.err.find("holds no optimizer state"), std::string::npos) << resume.err;
}

// The small model of the tests below, and the task it is imported for (its 8 positions hold 2
// mqar pairs).
constexpr int64_t kV = 19, kD = 8, kL = 2, kP = 8;

TrainConfig small_task() {
  TrainConfig c;
  c.task.mqar_pairs = 2;
  return c;
}

// The imported model's logits on a fixed batch.
torch::Tensor logits_of(const std::string& run_dir) {
  Restored r = restore(run_dir);
  torch::manual_seed(1);
  const auto tokens = torch::randint(r.config.model.vocab_size, {2, r.config.model.seq_len});
  torch::NoGradGuard no_grad;
  return r.model->forward(tokens);
}

// --set and --config's task keys are checked against the file's model, not recall's default model
// (vocabulary 96): mqar_values = 150 fits a vocabulary of 200.
TEST(Import, TaskKeysAreCheckedAgainstTheFilesModel) {
  TempDir dir;
  const int64_t V = 200, D = 8, L = 1, P = 8;
  write_folder(dir / "wide", gpt2_config(V, D, L, P), safetensors_bytes(gpt2_tensors(V, D, L, P)));
  auto args = [&](const std::string& values, const std::string& out) {
    return std::vector<std::string>{"import",       "--from",  dir / "wide",
                                    "--out",        dir / out, "--set",
                                    "mqar_pairs=2", "--set",   "mqar_values=" + values};
  };
  const auto ok = test::run_cli(args("150", "fits"), dir);
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(test::read_text(dir / "fits/config.toml").find("mqar_values = 150"), std::string::npos);
  test::expect_usage_errors({{args("198", "too-many"), "vocab_size = 200"}}, dir);
  EXPECT_FALSE(fs::exists(dir / "too-many"));
}

TEST(Import, TransformersConfigKeysThatKeepTheArchitectureAreIgnored) {
  TempDir dir;
  const std::string weights = safetensors_bytes(gpt2_tensors(kV, kD, kL, kP));
  write_folder(dir / "bare", gpt2_config(kV, kD, kL, kP), weights);
  import_model(dir / "bare", small_task(), dir / "bare-run");
  const auto want = logits_of(dir / "bare-run");
  // What GPT2Config.save_pretrained writes besides the sizes: dropouts, token ids, the
  // classification head's summary_* keys, generation defaults, the values of the fixed keys.
  const nlohmann::json common = {
      {"architectures", nlohmann::json::array({"GPT2LMHeadModel"})},
      {"attn_pdrop", 0.1},
      {"embd_pdrop", 0.1},
      {"resid_pdrop", 0.1},
      {"bos_token_id", kV - 1},
      {"eos_token_id", kV - 1},
      {"initializer_range", 0.02},
      {"n_inner", nullptr},
      {"reorder_and_upcast_attn", false},
      {"scale_attn_by_inverse_layer_idx", false},
      {"scale_attn_weights", true},
      {"summary_activation", nullptr},
      {"summary_first_dropout", 0.1},
      {"summary_proj_to_labels", true},
      {"summary_type", "cls_index"},
      {"summary_use_proj", true},
      {"task_specific_params", {{"text-generation", {{"do_sample", true}, {"max_length", 50}}}}},
      {"tie_word_embeddings", true},
      {"use_cache", true}};
  const std::pair<std::string, nlohmann::json> versions[] = {
      {"v4", {{"torch_dtype", "float32"}, {"transformers_version", "4.40.0"}, {"n_ctx", kP}}},
      {"v5",
       {{"dtype", "bfloat16"}, {"transformers_version", "5.0.0"}, {"pad_token_id", nullptr}}}};
  for (const auto& [name, keys] : versions) {
    auto config = gpt2_config(kV, kD, kL, kP);
    config.update(common);
    config.update(keys);
    write_folder(dir / name, config, weights);
    import_model(dir / name, small_task(), dir / (name + "-run"));
    EXPECT_TRUE(torch::equal(logits_of(dir / (name + "-run")), want)) << name;
  }
  // keys that change the architecture stay refused, each named
  const std::pair<std::string, nlohmann::json> changes[] = {
      {"n_kv_head", 1},
      {"rotary_dim", 4},
      {"scale_attn_by_inverse_layer_idx", true},
      {"add_cross_attention", true}};
  std::vector<std::pair<std::string, std::string>> cases;
  for (const auto& [key, value] : changes) {
    auto config = gpt2_config(kV, kD, kL, kP);
    config.update(common);
    config.update(versions[1].second);
    config[key] = value;
    write_folder(dir / key, config, weights);
    cases.emplace_back(key, key);
  }
  expect_refused_leaving_nothing(dir, cases);
}

TEST(Import, HalfPrecisionWeightsAreWidenedToFloat32) {
  TempDir dir;
  const auto tensors = gpt2_tensors(kV, kD, kL, kP);
  for (const auto type : {torch::kFloat16, torch::kBFloat16}) {
    const std::string name = c10::toString(type);
    NamedTensors half, wide;  // the file's weights, and the same rounded values in float32
    for (const auto& [n, t] : tensors) {
      half.emplace_back(n, t.to(type));
      wide.emplace_back(n, half.back().second.to(torch::kFloat32));
    }
    auto config = gpt2_config(kV, kD, kL, kP);
    config["torch_dtype"] = type == torch::kFloat16 ? "float16" : "bfloat16";
    write_folder(dir / (name + "-wide"), config, safetensors_bytes(wide));
    write_folder(dir / (name + "-safetensors"), config, safetensors_bytes(half));
    write_folder(dir / (name + "-bin"), config, torch_save_bytes(state_dict(half, false)),
                 "pytorch_model.bin");
    for (const std::string kind : {"-wide", "-safetensors", "-bin"})
      import_model(dir / (name + kind), small_task(), dir / (name + kind + "-run"));
    const auto want = logits_of(dir / (name + "-wide-run"));
    for (const std::string kind : {"-safetensors", "-bin"})
      EXPECT_LT((logits_of(dir / (name + kind + "-run")) - want).abs().max().item<double>(), 1e-6)
          << name << kind;
  }
}

// A model.safetensors.index.json for `shards` (file -> its tensors), as transformers writes it.
nlohmann::json index_of(const std::map<std::string, NamedTensors>& shards) {
  nlohmann::json map = nlohmann::json::object();
  for (const auto& [file, tensors] : shards)
    for (const auto& [name, t] : tensors) map[name] = file;
  return {{"metadata", {{"total_size", 0}}}, {"weight_map", map}};
}

void write_sharded(const std::string& dir, const std::map<std::string, NamedTensors>& shards,
                   const nlohmann::json& index) {
  write_folder(dir, gpt2_config(kV, kD, kL, kP), index.dump(), "model.safetensors.index.json");
  for (const auto& [file, tensors] : shards)
    test::write_text(dir + "/" + file, safetensors_bytes(tensors));
}

TEST(Import, ShardedSafetensorsAreReadAsOneStateDict) {
  TempDir dir;
  const auto tensors = gpt2_tensors(kV, kD, kL, kP);
  write_folder(dir / "one", gpt2_config(kV, kD, kL, kP), safetensors_bytes(tensors));
  const std::string a = "model-00001-of-00002.safetensors", b = "model-00002-of-00002.safetensors";
  const auto middle = tensors.begin() + static_cast<std::ptrdiff_t>(tensors.size() / 2);
  const std::map<std::string, NamedTensors> shards = {{a, {tensors.begin(), middle}},
                                                      {b, {middle, tensors.end()}}};
  write_sharded(dir / "sharded", shards, index_of(shards));
  import_model(dir / "one", small_task(), dir / "one-run");
  const ForeignModel m = import_model(dir / "sharded", small_task(), dir / "sharded-run");
  EXPECT_NE(m.format.find("sharded"), std::string::npos) << m.format;
  const auto one = restore(dir / "one-run").model->named_parameters();
  const auto sharded = restore(dir / "sharded-run").model->named_parameters();
  ASSERT_EQ(one.size(), sharded.size());
  for (const auto& p : one) EXPECT_TRUE(torch::equal(p.value(), sharded[p.key()])) << p.key();

  write_sharded(dir / "missing", shards, index_of(shards));
  fs::remove(dir / ("missing/" + b));
  auto twice = shards;
  twice[b].push_back(tensors[0]);
  write_sharded(dir / "twice", twice, index_of(shards));
  auto unnamed = index_of(shards);
  unnamed["weight_map"].erase("wte.weight");
  write_sharded(dir / "unnamed", shards, unnamed);
  auto elsewhere = index_of(shards);
  elsewhere["weight_map"]["wte.weight"] = b;
  write_sharded(dir / "elsewhere", shards, elsewhere);
  write_sharded(dir / "not-index", shards, nlohmann::json::array({a, b}));
  // a shard named by a path is not followed, even where that path holds a readable shard
  test::write_text(dir / a, safetensors_bytes(shards.at(a)));
  std::vector<std::pair<std::string, std::string>> cases = {
      {"missing", "names shard " + b + ", which the folder does not hold"},
      {"twice", "tensor wte.weight is in two shards, " + a + " and " + b},
      {"unnamed", "holds tensor wte.weight, which weight_map does not name"},
      {"elsewhere", "puts tensor wte.weight in " + b + ", which does not hold it"},
      {"not-index", "not a JSON object with a weight_map"}};
  const std::string escapes[] = {"../" + a, "sub/" + a, "..\\" + a, "..", ""};
  for (size_t i = 0; i < std::size(escapes); ++i) {
    auto index = index_of(shards);
    for (auto& [name, file] : index["weight_map"].items())
      if (file == a) file = escapes[i];
    const std::string folder = "escape-" + std::to_string(i);
    write_sharded(dir / folder, shards, index);
    cases.emplace_back(folder, "not a file name in the folder");
  }
  expect_refused_leaving_nothing(dir, cases);
}

TEST(Import, WeightsHoldingNanOrInfAreRefusedLeavingNothing) {
  TempDir dir;
  const auto tensors = gpt2_tensors(kV, kD, kL, kP);
  // the tensors with `value` at the second element of `name`, in `type`
  auto with = [&](const std::string& name, double value, torch::ScalarType type) {
    NamedTensors out;
    for (const auto& [n, t] : tensors) {
      auto c = t.clone();
      if (n == name) c.view(-1)[1] = value;
      out.emplace_back(n, c.to(type));
    }
    return out;
  };
  const auto config = gpt2_config(kV, kD, kL, kP);
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  write_folder(dir / "nan", config,
               safetensors_bytes(with("h.0.attn.c_attn.weight", nan, torch::kFloat32)));
  // float16's largest value is 65504: a larger weight saved in float16 is Inf
  write_folder(dir / "overflow", config,
               safetensors_bytes(with("h.1.mlp.c_fc.bias", 1e5, torch::kFloat16)));
  write_folder(dir / "bin", config,
               torch_save_bytes(state_dict(with("ln_f.weight", -inf, torch::kBFloat16), false)),
               "pytorch_model.bin");
  const auto bad = with("h.1.ln_2.bias", nan, torch::kFloat32);
  const auto middle = bad.begin() + static_cast<std::ptrdiff_t>(bad.size() / 2);
  const std::map<std::string, NamedTensors> shards = {{"a.safetensors", {bad.begin(), middle}},
                                                      {"b.safetensors", {middle, bad.end()}}};
  write_sharded(dir / "shard", shards, index_of(shards));
  expect_refused_leaving_nothing(
      dir, {{"nan",
             "model.safetensors: tensor h.0.attn.c_attn.weight holds NaN or Inf; it is "
             "refused"},
            {"overflow", "tensor h.1.mlp.c_fc.bias holds NaN or Inf"},
            {"bin", "pytorch_model.bin: tensor transformer.ln_f.weight holds NaN or Inf"},
            {"shard", "b.safetensors: tensor h.1.ln_2.bias holds NaN or Inf"}});
  // a causal mask buffer is not a weight (recall computes its own): its -Inf is no matter
  auto masked = tensors;
  masked.emplace_back("h.0.attn.masked_bias", torch::full({1}, -inf));
  write_folder(dir / "mask", config, safetensors_bytes(masked));
  EXPECT_EQ(test::run_cli(import_args(dir, dir / "mask", "mask-run"), dir).code, 0);
}

}  // namespace
}  // namespace recall
