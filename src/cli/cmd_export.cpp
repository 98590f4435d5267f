// recall export: a checkpoint as a PyTorch state dict (model.pt, torch.load reads it with its
// defaults), the same tensors as model.safetensors, and config.json; python/recall_model.py loads
// them.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "output.h"
#include "recall/core/io.h"
#include "recall/train/export.h"

namespace recall::cli {

void add_export(CLI::App& root, Action& action) {
  struct Args {
    std::string checkpoint, out;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = root.add_subcommand(
      "export",
      "write a checkpoint's weights for PyTorch (model.pt for torch.load, model.safetensors) with "
      "config.json");
  cmd->add_option("--checkpoint", args->checkpoint, kCheckpointHelp)->required();
  cmd->add_option("--out", args->out, "folder for model.pt, model.safetensors and config.json")
      ->required();
  cmd->callback([args, &action] {
    check_output_dir("--out", args->out);
    action = [args] {
      export_checkpoint(args->checkpoint, args->out);
      if (!quiet())
        fmt::print(stderr,
                   "exported {} to {}/model.pt, model.safetensors and config.json; in Python: "
                   "recall_model.load(\"{}\") (python/recall_model.py)\n",
                   args->checkpoint, args->out, args->out);
      return 0;
    };
  });
}

}  // namespace recall::cli
