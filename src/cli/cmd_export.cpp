// recall export: a checkpoint as a PyTorch state dict (model.pt, torch.load reads it with its
// defaults), the same tensors as model.safetensors, and config.json; python/recall_model.py loads
// them. With --format gpt2, llama, qwen2 or qwen3, a model of that architecture as a folder that
// transformers loads.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "output.h"
#include "recall/core/io.h"
#include "recall/train/export.h"

namespace recall::cli {

void add_export(CLI::App& root, Action& action) {
  struct Args {
    std::string checkpoint, out, format = "recall";
  };
  auto args = std::make_shared<Args>();
  auto* cmd = root.add_subcommand(
      "export",
      "write a checkpoint's weights for PyTorch (model.pt for torch.load, model.safetensors) with "
      "config.json");
  cmd->add_option("--checkpoint", args->checkpoint, kCheckpointHelp)->required();
  cmd->add_option("--out", args->out, "folder for model.pt, model.safetensors and config.json")
      ->required();
  cmd->add_option("--format", args->format,
                  "recall (model.pt, model.safetensors, config.json of every recall model); "
                  "gpt2: config.json and model.safetensors that transformers' "
                  "GPT2LMHeadModel.from_pretrained loads, for a model of GPT-2's architecture "
                  "(learned positions, layernorm, a gelu mlp, biases); llama, qwen2, qwen3: the "
                  "same for LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM (rope, rmsnorm, "
                  "swiglu; qwen2 with qkv_bias, qwen3 with attn_qk_rmsnorm)")
      ->capture_default_str();
  cmd->callback([args, &action] {
    const ExportFormat format = export_format_from_string(args->format);
    check_output_dir("--out", args->out);
    action = [args, format] {
      export_checkpoint(args->checkpoint, args->out, format);
      if (quiet()) return 0;
      if (format != ExportFormat::kRecall)
        fmt::print(stderr,
                   "exported {} to {}/config.json and model.safetensors; in Python: "
                   "transformers.{}.from_pretrained(\"{}\")\n",
                   args->checkpoint, args->out,
                   format == ExportFormat::kGpt2 ? std::string("GPT2LMHeadModel")
                                                 : llama_architecture(llama_family(format)),
                   args->out);
      else
        fmt::print(stderr,
                   "exported {} to {}/model.pt, model.safetensors and config.json; in Python: "
                   "recall_model.load(\"{}\") (python/recall_model.py)\n",
                   args->checkpoint, args->out, args->out);
      return 0;
    };
  });
}

}  // namespace recall::cli
