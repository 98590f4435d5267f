// recall import: a model trained elsewhere (a nanoGPT checkpoint; a GPT-2, Llama, Qwen2 or Qwen3
// folder) as a recall checkpoint, for eval, sample, inspect, extrapolate and export.
#include <fmt/format.h>

#include <algorithm>

#include "commands.h"
#include "output.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/train/import.h"

namespace recall::cli {

void add_import(CLI::App& root, Action& action) {
  struct Args {
    std::string from, out, config;
    std::vector<std::string> sets;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = root.add_subcommand(
      "import",
      "a nanoGPT checkpoint or a GPT-2, Llama, Qwen2 or Qwen3 folder as a recall checkpoint");
  cmd->add_option("--from", args->from,
                  "nanoGPT ckpt.pt, or a folder (GPT-2, Llama, Qwen2, Qwen3) with config.json and "
                  "model.safetensors (or model.safetensors.index.json and its shards) or "
                  "pytorch_model.bin")
      ->required();
  cmd->add_option("--out", args->out, "run folder for checkpoint.bin and config.toml")->required();
  cmd->add_option("--config", args->config,
                  "TOML file or preset for the task and evaluation keys (default: mqar); its "
                  "model keys are replaced by the file's");
  cmd->add_option("--set", args->sets, "override a task or trainer key: --set key=value");
  cmd->callback([args, &action] {
    check_output_dir("--out", args->out);
    action = [args] {
      for (const auto& s : args->sets) {
        const std::string key = s.substr(0, s.find('='));
        const auto& model_keys = model_config_keys();
        if (std::find(model_keys.begin(), model_keys.end(), key) != model_keys.end())
          throw UsageError(
              fmt::format("--set {}: {} is a model key, and the model's keys come "
                          "from --from's file",
                          s, key));
      }
      // the task is checked against the file's model, in import_model
      const TrainConfig config =
          args->config.empty()
              ? train_config_from_toml("", "--set", args->sets, "", ModelCheck::kReplacedLater)
              : train_config_from_file(args->config, args->sets, ModelCheck::kReplacedLater);
      const ForeignModel m = import_model(args->from, config, args->out);
      if (!quiet())
        fmt::print(stderr,
                   "imported {} ({} layers, d_model {}, {} heads{}, seq_len {}, vocab {}, "
                   "activation {}, {} head) to {}/checkpoint.bin; e.g. recall inspect "
                   "--checkpoint {}\n",
                   m.format, m.config.n_layers, m.config.d_model, m.config.n_heads,
                   m.config.kv_heads() != m.config.n_heads
                       ? fmt::format(" sharing {} key/value heads", m.config.kv_heads())
                       : "",
                   m.config.seq_len, m.config.vocab_size, to_string(m.config.activation),
                   m.config.tied_head ? "tied" : "untied", args->out, args->out);
      return 0;
    };
  });
}

}  // namespace recall::cli
