#include "recall/train/export.h"

#include <toml++/toml.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "recall/core/enum_names.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/formats/safetensors.h"
#include "recall/formats/torch_save.h"
#include "recall/models/norm.h"
#include "recall/stores/rope.h"
#include "recall/train/foreign_config.h"
#include "recall/train/gpt2_names.h"
#include "recall/train/llama_names.h"
#include "recall/train/trainer.h"

namespace recall {
namespace fs = std::filesystem;

namespace {
constexpr std::array<const char*, 5> kExportFormatNames = {"recall", "gpt2", "llama", "qwen2",
                                                           "qwen3"};
}  // namespace

std::string to_string(ExportFormat v) {
  return enum_name(kExportFormatNames, v);
}
ExportFormat export_format_from_string(const std::string& s) {
  return enum_from_name<ExportFormat>(kExportFormatNames, s, "--format");
}

std::string state_dict_pickle(const torch::nn::Module& module) {
  return state_dict_pickle(named_state(module));
}

NamedTensors named_state(const torch::nn::Module& module) {
  NamedTensors out;
  // Detached contiguous CPU copies: plain tensors, no autograd state.
  for (const auto& p : module.named_parameters(/*recurse=*/true))
    out.emplace_back(p.key(), p.value().detach().to(torch::kCPU).contiguous().clone());
  for (const auto& b : module.named_buffers(/*recurse=*/true)) {
    // head_mask (attention.h) is inspection state, all ones outside recall inspect, not a weight
    const std::string& name = b.key();
    const std::string mask = "head_mask";
    if (name.size() >= mask.size() &&
        name.compare(name.size() - mask.size(), mask.size(), mask) == 0)
      continue;
    out.emplace_back(name, b.value().detach().to(torch::kCPU).contiguous().clone());
  }
  return out;
}

namespace {
// The model keys (model_config_items, their one writer), each TOML literal read back as the JSON
// value it spells (norm_eps and rope_base among them, which older exports wrote as constants).
nlohmann::json model_json(const ModelConfig& c) {
  nlohmann::json j;
  for (const auto& [key, literal] : model_config_items(c)) {
    const toml::table t = toml::parse("v = " + literal);
    const toml::node& v = *t.get("v");
    if (const auto i = v.value_exact<int64_t>())
      j[key] = *i;
    else if (const auto d = v.value_exact<double>())
      j[key] = *d;
    else if (const auto b = v.value_exact<bool>())
      j[key] = *b;
    else
      j[key] = v.value_exact<std::string>().value();
  }
  return j;
}

// A text run's id -> byte or codepoint, which a reader of the exported model decodes with.
void add_vocabulary(nlohmann::json& j, const TrainConfig& config,
                    const std::vector<int64_t>& vocabulary) {
  j["text_units"] = to_string(config.task.text_units);
  j["vocabulary"] = vocabulary;
}
// A folder transformers' from_pretrained reads: the weights, the config, and a text run's
// vocabulary beside them.
void write_transformers_folder(const std::string& out_dir, const NamedTensors& weights,
                               const nlohmann::json& model_json, const TrainConfig& config,
                               const std::vector<int64_t>& vocabulary) {
  make_output_dir("--out", out_dir);
  write_file_atomic((fs::path(out_dir) / "model.safetensors").string(),
                    safetensors_bytes(weights, {{"format", "pt"}}));
  if (config.task.kind == TaskKind::kText) {
    nlohmann::json v;
    add_vocabulary(v, config, vocabulary);
    write_file_atomic((fs::path(out_dir) / "vocabulary.json").string(), v.dump() + "\n");
  }
  write_file_atomic((fs::path(out_dir) / "config.json").string(), model_json.dump(2) + "\n");
}

}  // namespace

void export_model(const Transformer& model, const TrainConfig& config, int64_t step,
                  const std::vector<int64_t>& vocabulary, const std::string& out_dir) {
  make_output_dir("--out", out_dir);
  nlohmann::json j{{"model", model_json(model->config)},
                   {"task", to_string(config.task.kind)},
                   {"step", step},
                   {"format", "recall-export-1"}};
  if (config.task.kind == TaskKind::kText) add_vocabulary(j, config, vocabulary);
  const NamedTensors state = named_state(*model);
  write_file_atomic((fs::path(out_dir) / "model.pt").string(), state_dict_pickle(state));
  write_file_atomic((fs::path(out_dir) / "model.safetensors").string(),
                    safetensors_bytes(state, {{"format", "pt"}}));
  write_file_atomic((fs::path(out_dir) / "config.json").string(), j.dump(2) + "\n");
}

void export_gpt2(const Transformer& model, const TrainConfig& config,
                 const std::vector<int64_t>& vocabulary, const std::string& out_dir) {
  const nlohmann::json gpt2 = gpt2_json_from_model_config(model->config, "--format gpt2");
  std::map<std::string, torch::Tensor> state;
  for (auto& [name, t] : named_state(*model)) state.emplace(name, std::move(t));
  NamedTensors out;
  for (const auto& n : gpt2_names(model->config, /*conv1d=*/true)) {
    auto it = state.find(n.recall);
    if (it == state.end()) throw std::logic_error("export: recall has no tensor " + n.recall);
    // GPT2LMHeadModel's names: the body under "transformer.", the untied head beside it
    const std::string name = n.gpt2 == "lm_head.weight" ? n.gpt2 : "transformer." + n.gpt2;
    out.emplace_back(name, n.transpose ? it->second.t().contiguous() : it->second);
    state.erase(it);
  }
  if (!state.empty())
    throw std::logic_error("export: GPT-2 has no place for recall's " + state.begin()->first);
  write_transformers_folder(out_dir, out, gpt2, config, vocabulary);
}

LlamaFamily llama_family(ExportFormat format) {
  return llama_family_from_string(to_string(format));
}

void export_llama(const Transformer& model, LlamaFamily family, const TrainConfig& config,
                  const std::vector<int64_t>& vocabulary, const std::string& out_dir) {
  const nlohmann::json j =
      llama_json_from_model_config(model->config, family, "--format " + to_string(family));
  std::map<std::string, torch::Tensor> state;
  for (auto& [name, t] : named_state(*model)) state.emplace(name, std::move(t));
  NamedTensors out;
  for (const auto& n : llama_names(model->config)) {
    auto it = state.find(n.recall);
    if (it == state.end()) throw std::logic_error("export: recall has no tensor " + n.recall);
    // the stacked rows (q, k, v) back into the family's separate maps
    int64_t row = 0;
    for (size_t i = 0; i < n.hf.size(); ++i) {
      out.emplace_back(n.hf[i], it->second.narrow(0, row, n.rows[i]).contiguous());
      row += n.rows[i];
    }
    state.erase(it);
  }
  if (!state.empty())
    throw std::logic_error("export: " + to_string(family) + " has no place for recall's " +
                           state.begin()->first);
  write_transformers_folder(out_dir, out, j, config, vocabulary);
}

void export_checkpoint(const std::string& checkpoint, const std::string& out_dir,
                       ExportFormat format) {
  check_output_dir("--out", out_dir);
  // A folder holds one export: over another kind of folder (the other format's export, a model
  // downloaded for transformers), files of both would lie side by side, or the other be lost.
  const fs::path dir(out_dir);
  std::error_code ec;
  const bool has_config = fs::exists(dir / "config.json", ec);
  std::string found;  // the format of what the folder holds, where it holds one
  if (fs::exists(dir / "model.pt", ec)) found = "recall";
  if (has_config && found.empty()) {
    const auto j = nlohmann::json::parse(read_file("--out", (dir / "config.json").string()),
                                         nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("format")) found = "recall";
    // the transformers formats by their model_type: gpt2, llama, qwen2, qwen3
    if (j.is_object() && j.contains("model_type") && j["model_type"].is_string())
      for (const char* name : kExportFormatNames)
        if (name != std::string("recall") && j["model_type"] == name) found = name;
    if (found.empty())
      throw UsageError(fmt::format(
          "--out {}: holds a config.json that no recall export wrote; give an empty folder",
          out_dir));
  }
  // a transformers export's vocabulary without its config.json: a GPT-2 export, as before the
  // others
  if (found.empty() && fs::exists(dir / "vocabulary.json", ec)) found = "gpt2";
  if (!found.empty() && found != to_string(format))
    throw UsageError(fmt::format(
        "--out {}: holds an export of --format {}, the other format; give an empty folder", out_dir,
        found));
  const Restored r = restore(checkpoint);
  if (format == ExportFormat::kGpt2)
    export_gpt2(r.model, r.config, r.vocabulary, out_dir);
  else if (format == ExportFormat::kRecall)
    export_model(r.model, r.config, r.step, r.vocabulary, out_dir);
  else
    export_llama(r.model, llama_family(format), r.config, r.vocabulary, out_dir);
}

}  // namespace recall
