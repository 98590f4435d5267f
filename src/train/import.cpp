#include "recall/train/import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/formats/torch_pickle.h"
#include "recall/train/checkpoint.h"
#include "recall/train/foreign_config.h"
#include "recall/train/gpt2_names.h"
#include "recall/train/llama_names.h"
#include "recall/train/task.h"

namespace recall {
namespace fs = std::filesystem;

namespace {

// A tensor of the file as recall holds it: float32, the half-precision kinds widened exactly.
torch::Tensor as_float32(const std::string& name, const torch::Tensor& t,
                         const std::string& source) {
  const auto type = t.scalar_type();
  if (type != torch::kFloat32 && type != torch::kFloat16 && type != torch::kBFloat16)
    throw UsageError(
        fmt::format("{}: tensor {} has dtype {}; recall holds float32 (float16 and "
                    "bfloat16 widen exactly): convert the file to float32",
                    source, name, c10::toString(type)));
  return t.to(torch::kFloat32);
}

// GPT-2's names without the prefixes that wrap them: torch.compile's "_orig_mod." and the
// language-model head's "transformer.".
std::string plain_name(std::string name) {
  for (const std::string prefix : {"_orig_mod.", "transformer."})
    if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  return name;
}

// Buffers of the file that recall computes instead: the causal masks of nanoGPT and GPT-2.
bool is_mask(const std::string& name) {
  auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".attn.bias") || ends(".attn.masked_bias");
}

void add_tensor(std::map<std::string, torch::Tensor>& out, const std::string& name,
                const torch::Tensor& t, const std::string& source) {
  torch::Tensor f = as_float32(name, t, source);
  // A weight that is not finite (a diverged run, a float16 overflow) makes every logit NaN; it is
  // refused here, before anything is written. A mask is not a weight: recall computes its own.
  if (!is_mask(name) && !torch::isfinite(f).all().item<bool>())
    throw UsageError(fmt::format("{}: tensor {} holds NaN or Inf; it is refused", source, name));
  if (!out.emplace(plain_name(name), std::move(f)).second)
    throw UsageError(fmt::format("{}: holds tensor {} twice (with and without a prefix)", source,
                                 plain_name(name)));
}

std::map<std::string, torch::Tensor> state_of_pickle(const PickleValue& dict,
                                                     const std::string& source) {
  if (dict.kind != PickleValue::Kind::kDict)
    throw UsageError(
        fmt::format("{}: its state dict is a {}, not a dict", source, dict.describe()));
  std::map<std::string, torch::Tensor> out;
  for (const auto& [k, v] : dict.entries) {
    if (k->kind != PickleValue::Kind::kString)
      throw UsageError(fmt::format("{}: its state dict has a key that is not a name", source));
    if (v->kind != PickleValue::Kind::kTensor)
      throw UsageError(fmt::format("{}: state dict entry {} is a {}, not a tensor", source, k->s,
                                   v->describe()));
    add_tensor(out, k->s, v->tensor, source);
  }
  return out;
}

ForeignModel read_nanogpt(const std::string& path) {
  const PickleRef ckpt = read_torch_file(path);
  const PickleValue* args = ckpt->get("model_args");
  const PickleValue* model = ckpt->get("model");
  if (!args || !model)
    throw UsageError(
        fmt::format("{}: is not a nanoGPT checkpoint (a dict with model_args and "
                    "model); name a nanoGPT ckpt.pt or a GPT-2-format folder",
                    path));
  ForeignModel m;
  m.format = "nanoGPT checkpoint";
  m.config = model_config_from_nanogpt(*args, path);
  m.tensors = state_of_pickle(*model, path);
  if (const PickleValue* it = ckpt->get("iter_num"); it && it->kind == PickleValue::Kind::kInt)
    m.step = std::max<int64_t>(0, it->i);
  // nanoGPT ties lm_head to wte; a head that differs (a peer that unties it) stays its own.
  auto head = m.tensors.find("lm_head.weight");
  auto wte = m.tensors.find("wte.weight");
  if (head != m.tensors.end() && wte != m.tensors.end()) {
    if (head->second.sizes() == wte->second.sizes() && torch::equal(head->second, wte->second))
      m.tensors.erase(head);
    else
      m.config.tied_head = false;
  }
  return m;
}

SafetensorsFile read_safetensors_file(const fs::path& path) {
  return read_safetensors(read_file("--from", path.string()), path.string());
}

// The shards that model.safetensors.index.json names ({"metadata": ..., "weight_map": {tensor:
// shard file}}), read as one state dict. Each shard is a file of the folder itself (a name that
// leads elsewhere is not followed), and each tensor lies in the one shard the index names for it.
std::map<std::string, torch::Tensor> read_shards(const fs::path& root, const fs::path& index) {
  auto refuse = [&](const std::string& why) {
    return UsageError(fmt::format("{}: {}; it is refused", index.string(), why));
  };
  const auto j = nlohmann::json::parse(read_file("--from", index.string()), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
      !j["weight_map"].is_object())
    throw refuse("is not a JSON object with a weight_map of tensor names to shard files");
  std::map<std::string, std::string> mapped;  // tensor -> shard, as the index says
  for (const auto& item : j["weight_map"].items()) {
    const auto& v = item.value();
    const std::string shard = v.is_string() ? v.get<std::string>() : "";
    if (shard.empty() || shard == "." || shard == ".." ||
        shard.find_first_of("/\\") != std::string::npos)
      throw refuse(
          fmt::format("weight_map gives tensor {} the shard {}, not a file name in the "
                      "folder (no path separator, not ..)",
                      item.key(), v.dump()));
    mapped[item.key()] = shard;
  }
  std::set<std::string> shards;
  for (const auto& [name, shard] : mapped) shards.insert(shard);
  std::map<std::string, torch::Tensor> out;
  std::map<std::string, std::string> found;  // tensor -> the shard that holds it
  for (const auto& shard : shards) {
    const fs::path path = root / shard;
    if (std::error_code ec; !fs::is_regular_file(path, ec))
      throw refuse(fmt::format(
          "names shard {}, which the folder does not hold (copy every shard beside the index)",
          shard));
    const auto file = read_safetensors_file(path);
    for (const auto& [name, t] : file.tensors) {
      if (const auto [it, fresh] = found.emplace(name, shard); !fresh)
        throw refuse(fmt::format("tensor {} is in two shards, {} and {}", name, it->second, shard));
      add_tensor(out, name, t, path.string());
    }
  }
  for (const auto& [name, shard] : mapped)
    if (const auto it = found.find(name); it == found.end() || it->second != shard)
      throw refuse(
          fmt::format("weight_map puts tensor {} in {}, which does not hold it", name, shard));
  for (const auto& [name, shard] : found)
    if (!mapped.count(name))
      throw refuse(
          fmt::format("shard {} holds tensor {}, which weight_map does not name", shard, name));
  return out;
}

// A folder that transformers' save_pretrained wrote (or one of its format): config.json, whose
// model_type says the architecture (gpt2 where it names none; llama, qwen2, qwen3), and the
// weights.
ForeignModel read_folder(const std::string& dir) {
  const fs::path root(dir);
  const std::string config_file = (root / "config.json").string();
  if (!fs::exists(config_file))
    throw UsageError(
        fmt::format("{}: the folder holds no config.json; a GPT-2, Llama, Qwen2 or Qwen3 folder "
                    "has config.json with model.safetensors or pytorch_model.bin",
                    dir));
  ForeignModel m;
  const std::string config_text = read_file("--from", config_file);
  const std::string type = foreign_model_type(config_text);
  std::string kind = "GPT-2-format folder";
  if (type == "llama" || type == "qwen2" || type == "qwen3") {
    m.config = model_config_from_llama_json(config_text, config_file);
    m.llama = true;
    kind = llama_architecture(llama_family_from_string(type)) + " folder";
  } else if (type.empty() || type == "gpt2") {
    m.config = model_config_from_gpt2_json(config_text, config_file);
  } else {
    throw UsageError(
        fmt::format("{}: model_type = {}: recall imports the model types gpt2, llama, "
                    "qwen2 and qwen3; it is refused",
                    config_file, type));
  }
  // transformers' own order: the single file before the sharded one, safetensors before pickles.
  const fs::path st = root / "model.safetensors", index = root / "model.safetensors.index.json",
                 bin = root / "pytorch_model.bin";
  if (fs::exists(st)) {
    m.format = kind + " (model.safetensors)";
    const auto file = read_safetensors_file(st);
    for (const auto& [name, t] : file.tensors) add_tensor(m.tensors, name, t, st.string());
  } else if (fs::exists(index)) {
    m.format = kind + " (sharded model.safetensors)";
    m.tensors = read_shards(root, index);
  } else if (fs::exists(bin)) {
    m.format = kind + " (pytorch_model.bin)";
    m.tensors = state_of_pickle(*read_torch_file(bin.string()), bin.string());
  } else {
    throw UsageError(fmt::format(
        "{}: holds neither model.safetensors, model.safetensors.index.json nor "
        "pytorch_model.bin (a sharded pytorch_model.bin is not read: save it as safetensors)",
        dir));
  }
  const std::string embedding = m.llama ? "model.embed_tokens.weight" : "wte.weight";
  const auto head = m.tensors.find("lm_head.weight");
  if (m.config.tied_head && head != m.tensors.end()) {
    const auto wte = m.tensors.find(embedding);
    if (wte == m.tensors.end() || head->second.sizes() != wte->second.sizes() ||
        !torch::equal(head->second, wte->second))
      throw UsageError(
          fmt::format("{}: lm_head.weight differs from {}, but "
                      "tie_word_embeddings is true; it is refused",
                      dir, embedding));
    m.tensors.erase(head);
  }
  if (m.llama && !m.config.tied_head && head == m.tensors.end())
    throw UsageError(
        fmt::format("{}: holds no lm_head.weight, but tie_word_embeddings is false (an untied "
                    "head); it is refused",
                    dir));
  m.conv1d = !m.llama;
  return m;
}

// Where each of recall's parameters comes from in the file: the names whose rows are stacked into
// it (one but for the Llama families' q, k, v), and whether they are stored (in, out).
struct Placement {
  std::string recall;
  std::vector<std::string> names;
  bool transpose;
};

std::vector<Placement> placements(const ForeignModel& m) {
  std::vector<Placement> out;
  if (m.llama) {
    for (auto& n : llama_names(m.config)) out.push_back({n.recall, n.hf, false});
  } else {
    for (auto& n : gpt2_names(m.config, m.conv1d)) out.push_back({n.recall, {n.gpt2}, n.transpose});
  }
  return out;
}

}  // namespace

ForeignModel read_foreign_model(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return read_folder(path);
  if (!fs::exists(path, ec))
    throw UsageError(fmt::format("--from {}: no such file or folder", path));
  return read_nanogpt(path);
}

Transformer build_foreign_model(ForeignModel& m) {
  Transformer model(m.config);
  auto params = model->named_parameters();
  // Each file tensor is dropped once copied, so the file's weights and the model's are held
  // together for one tensor at a time, not for the whole model.
  auto& rest = m.tensors;
  size_t set = 0;
  torch::NoGradGuard no_grad;
  for (const auto& p : placements(m)) {
    torch::Tensor* target = params.find(p.recall);
    if (!target) throw std::logic_error("import: recall has no parameter " + p.recall);
    int64_t row = 0;  // the next of target's rows to fill
    for (const auto& name : p.names) {
      auto it = rest.find(name);
      if (it == rest.end())
        throw UsageError(fmt::format("{}: lacks tensor {} (for recall's {}); it is refused",
                                     m.format, name, p.recall));
      torch::Tensor t = p.transpose ? it->second.t() : it->second;
      // each part is a block of rows of target: q's, then k's, then v's
      const bool fits = t.dim() == target->dim() && t.dim() >= 1 &&
                        row + t.size(0) <= target->size(0) &&
                        t.sizes().slice(1) == target->sizes().slice(1) &&
                        (p.names.size() > 1 || t.size(0) == target->size(0));
      if (!fits)
        throw UsageError(
            fmt::format("{}: tensor {} has shape [{}], recall's {} needs [{}]{}; it is "
                        "refused",
                        m.format, name, fmt::join(it->second.sizes(), ", "), p.recall,
                        fmt::join(target->sizes(), ", "),
                        p.transpose          ? " (transposed from GPT-2's Conv1D)"
                        : p.names.size() > 1 ? " (the rows of q, k and v stacked)"
                                             : ""));
      target->narrow(0, row, t.size(0)).copy_(t);
      row += t.size(0);
      rest.erase(it);
    }
    if (row != target->size(0))
      throw UsageError(
          fmt::format("{}: the rows of {} stack to {}, recall's {} needs {}; it is "
                      "refused",
                      m.format, fmt::join(p.names, ", "), row, p.recall, target->size(0)));
    ++set;
  }
  for (const auto& [name, t] : rest)
    if (!is_mask(name))
      throw UsageError(
          fmt::format("{}: tensor {} has no place in recall's model (the architecture as its "
                      "config gives it); it is refused",
                      m.format, name));
  if (set != params.size())
    throw std::logic_error(fmt::format("import: {} of {} parameters set", set, params.size()));
  model->eval();
  return model;
}

ForeignModel import_model(const std::string& path, TrainConfig config, const std::string& out_dir) {
  check_output_dir("--out", out_dir);
  if (fs::exists(checkpoint_path(out_dir)))
    throw UsageError(fmt::format("--out {}: holds a run already; choose another folder", out_dir));
  ForeignModel m = read_foreign_model(path);
  m.format = fmt::format("{} {}", m.format, path);
  config.model = m.config;
  try {
    config.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(
        fmt::format("{}: the imported model does not fit the task: {}", path, e.what()));
  }
  std::vector<int64_t> vocabulary;
  if (config.task.kind == TaskKind::kText) {
    const auto task = make_task(config, {});
    vocabulary = task->vocabulary();
    if (task->vocab_size() != m.config.vocab_size)
      throw UsageError(fmt::format(
          "{}: the model has vocab_size {}, the text task's corpus has {} distinct {}s; name the "
          "corpus it was trained on (text_file, text_units)",
          path, m.config.vocab_size, task->vocab_size(), to_string(config.task.text_units)));
  }
  // The model lives only until its bytes are taken: the weights are then held twice at most.
  // Torch's generator (which building the model draws from, and whose state the checkpoint keeps)
  // starts from the config's seed, as training does: the same import gives the same bytes.
  torch::manual_seed(static_cast<uint64_t>(config.trainer.seed));
  std::string weights = module_bytes(*build_foreign_model(m));
  make_output_dir("--out", out_dir);
  std::ostringstream task_rng;
  task_rng << Rng(static_cast<uint64_t>(config.trainer.seed));
  // No optimizer state: the checkpoint is for evaluation and analysis (train --resume refuses it).
  save_checkpoint(checkpoint_path(out_dir),
                  {config.to_toml(), m.step, task_rng.str(), torch_rng_state(), vocabulary,
                   std::move(weights), "", 1});
  write_file_atomic((fs::path(out_dir) / "config.toml").string(), config.to_toml());
  return m;
}

}  // namespace recall
