#include "recall/train/export.h"

#include <torch/serialize.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "recall/core/io.h"
#include "recall/train/trainer.h"

namespace recall {
namespace fs = std::filesystem;

std::string state_dict_pickle(const torch::nn::Module& module) {
  c10::Dict<std::string, torch::Tensor> dict;
  // Detached contiguous copies: the pickle holds plain tensors, no autograd state.
  for (const auto& p : module.named_parameters(/*recurse=*/true))
    dict.insert(p.key(), p.value().detach().contiguous().clone());
  for (const auto& b : module.named_buffers(/*recurse=*/true))
    dict.insert(b.key(), b.value().detach().contiguous().clone());
  const std::vector<char> bytes = torch::pickle_save(dict);
  return std::string(bytes.begin(), bytes.end());
}

namespace {
nlohmann::json model_json(const ModelConfig& c) {
  return {{"vocab_size", c.vocab_size},
          {"d_model", c.d_model},
          {"n_layers", c.n_layers},
          {"n_heads", c.n_heads},
          {"seq_len", c.seq_len},
          {"pos", to_string(c.pos)},
          {"norm", to_string(c.norm)},
          {"tied_head", c.tied_head},
          {"bias", c.bias},
          {"attn_rule", to_string(c.attn_rule)},
          {"attn_scale", c.attn_scale},
          {"ffn", to_string(c.ffn)},
          {"activation", to_string(c.activation)},
          {"ffn_mult", c.ffn_mult},
          {"ffn_slots", c.ffn_slots},
          {"attn_mem_kv", c.attn_mem_kv},
          {"attn_conv", c.attn_conv},
          {"norm_eps", 1e-5},
          {"rope_base", 10000.0}};
}
}  // namespace

void export_model(const Transformer& model, const TrainConfig& config, int64_t step,
                  const std::vector<int64_t>& vocabulary, const std::string& out_dir) {
  make_output_dir("--out", out_dir);
  nlohmann::json j{{"model", model_json(model->config)},
                   {"task", to_string(config.task.kind)},
                   {"step", step},
                   {"format", "recall-export-1"}};
  if (config.task.kind == TaskKind::kText) {
    j["text_units"] = to_string(config.task.text_units);
    j["vocabulary"] = vocabulary;
  }
  write_file_atomic((fs::path(out_dir) / "model.pt").string(), state_dict_pickle(*model));
  write_file_atomic((fs::path(out_dir) / "config.json").string(), j.dump(2) + "\n");
}

void export_checkpoint(const std::string& checkpoint, const std::string& out_dir) {
  check_output_dir("--out", out_dir);
  const Restored r = restore(checkpoint);
  export_model(r.model, r.config, r.step, r.vocabulary, out_dir);
}

}  // namespace recall
