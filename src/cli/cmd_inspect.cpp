// recall inspect: a checkpoint's feed-forward layers and attention heads as memory stores.
#include <fmt/format.h>

#include <cstdio>

#include "commands.h"
#include "output.h"
#include "recall/analysis/inspect.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/formats/plot.h"

namespace recall::cli {

void add_inspect(CLI::App& root, Action& action) {
  struct Opts {
    std::string checkpoint, json, plot, device = "cpu", pairs = "fixed";
    std::vector<int64_t> lengths = {1, 2, 4, 8, 16};
    std::vector<std::string> rules = rule_names(/*learned=*/true);
    int64_t batches = 2, max_ram = 0;
    bool no_ablate = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = root.add_subcommand("inspect", "a checkpoint's layers as memory stores");
  cmd->add_option("--checkpoint", o->checkpoint, kCheckpointHelp)->required();
  auto* lengths = cmd->add_option("--lengths", o->lengths,
                                  "mqar lengths, multiples of the training length (a model with "
                                  "learned positions: 1 only, its default)")
                      ->delimiter(',')
                      ->capture_default_str();
  cmd->add_option("--rules", o->rules, "beta rules applied at evaluation")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batches", o->batches, "mqar batches per length and rule")
      ->capture_default_str();
  cmd->add_option("--pairs", o->pairs,
                  "mqar pairs at longer lengths: fixed (the trained number) or grow (in "
                  "proportion to the length, up to the keys in the vocabulary)")
      ->capture_default_str();
  cmd->add_flag("--no-ablate", o->no_ablate,
                "skip the ablation column (one more forward pass per head: 144 of them for a "
                "12 x 12 model)");
  cmd->add_option("--json", o->json, "also write the result as JSON to this file (- : stdout)");
  cmd->add_option("--plot", o->plot, "write the plots to this file (.png or .svg)");
  add_device_option(cmd, o->device);
  add_max_ram(cmd, o->max_ram);
  cmd->callback([o, lengths, &action] {
    InspectConfig config;
    config.lengths = o->lengths;
    config.batches = o->batches;
    config.max_ram = o->max_ram;
    config.ablate = !o->no_ablate;
    config.pairs = pairs_at_length_from_string(o->pairs);
    config.rules = parse_rules("--rules", o->rules);
    config.validate();
    check_output("--json", o->json);
    if (!o->plot.empty()) check_plot_path("--plot", o->plot);
    action = [o, config, lengths_given = lengths->count() > 0]() mutable {
      Restored restored = restore(o->checkpoint, parse_device(o->device));
      // learned positions end at the training length (imported GPT-2-shaped models all have them)
      if (!lengths_given && restored.config.model.pos == PosKind::kLearned) config.lengths = {1};
      const InspectResult r = inspect(restored, config, o->checkpoint);
      if (!is_stdout(o->json)) std::fputs(inspect_table(r).c_str(), stdout);
      write_output(o->json, inspect_json(r));
      if (!o->plot.empty()) write_inspect_plot(r, o->plot);
      return 0;
    };
  });
}

}  // namespace recall::cli
