// recall extrapolate: mqar accuracy at multiples of the training length, per beta rule, of runs it
// trains itself (--config, one per rule) or of checkpoints.
#include <fmt/format.h>

#include <cstdio>

#include "commands.h"
#include "output.h"
#include "recall/analysis/extrapolate.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/experiments/extrapolate_runs.h"
#include "recall/formats/plot.h"

namespace recall::cli {

void add_extrapolate(CLI::App& root, Action& action) {
  struct Opts {
    std::string json, plot, device = "cpu", pairs = "fixed";
    std::vector<std::string> rules;
    ExtrapolateConfig config;  // --checkpoints, and how every run is scored
    ExtrapolateRuns runs;      // --config: what is trained
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = root.add_subcommand(
      "extrapolate", "accuracy at multiples of the training length, one trained run per rule");
  cmd->add_option("--config", o->runs.train_config,
                  "train this config once per rule, e.g. train/mqar-tiny.toml");
  cmd->add_option("--set", o->runs.sets, "override a config key: --set key=value (repeatable)");
  cmd->add_option("--out", o->runs.out_dir, "with --config: runs go to OUT/<rule>");
  cmd->add_option("--seeds", o->runs.seeds, "with --config: runs per rule, seeds seed, seed+1..")
      ->capture_default_str();
  cmd->add_option("--checkpoints", o->config.checkpoints,
                  "instead of --config: run folders or checkpoint files")
      ->delimiter(',');
  cmd->add_option("--lengths", o->config.lengths, "multiples of the training length")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--rules", o->rules,
                  "--config: rules trained (default all five); --checkpoints: rules at "
                  "evaluation (default each trained rule)")
      ->delimiter(',');
  cmd->add_option("--batches", o->config.batches, "evaluation batches per point")
      ->capture_default_str();
  cmd->add_option("--pairs", o->pairs,
                  "mqar pairs at longer lengths: fixed (the trained number) or grow (in "
                  "proportion to the length, up to the keys in the vocabulary)")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "also write the result as JSON to this file (- : stdout)");
  cmd->add_option("--plot", o->plot, "write accuracy against length to this file (.png or .svg)");
  add_device_option(cmd, o->device);
  add_max_ram(cmd, o->config.max_ram);
  cmd->callback([o, &action] {
    o->config.device = o->runs.run.device = parse_device(o->device);
    o->config.pairs = pairs_at_length_from_string(o->pairs);
    const std::vector<BetaRule> rules = parse_rules("--rules", o->rules);
    const bool train = !o->runs.train_config.empty();
    check_arg(o->config.checkpoints.empty() == train,
              "give either --checkpoints (evaluate runs) or --config (train one run per rule)");
    (train ? o->runs.rules : o->config.rules) = rules;
    if (train) o->runs.validate();
    o->config.validate();
    check_output("--json", o->json);
    if (!o->plot.empty()) check_plot_path("--plot", o->plot);
    if (!o->runs.out_dir.empty()) check_output_dir("--out", o->runs.out_dir);
    o->runs.run.stop = stop_on_signal();
    action = [o, train] {
      o->runs.run.progress = !quiet();
      return run_stoppable(
          [o, train] {
            const auto points =
                train ? train_and_extrapolate(o->runs, o->config) : extrapolate(o->config);
            if (!is_stdout(o->json)) std::fputs(extrapolate_table(points).c_str(), stdout);
            write_output(o->json, extrapolate_json(points));
            if (!o->plot.empty()) write_extrapolate_plot(points, o->plot);
            return 0;
          },
          "the same command resumes the runs in --out");
    };
  });
}

}  // namespace recall::cli
