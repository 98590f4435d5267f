// recall experiment NAME: one of the essay's claims as an experiment, written as JSON and a plot
// (recall/experiments/experiments.h).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "recall/core/io.h"
#include "recall/experiments/experiments.h"

namespace recall::cli {

void add_experiment(CLI::App& root, Action& action) {
  struct Opts {
    std::string name, out, device = "cpu";
    bool quick = false, quiet = false;
    int64_t steps = 0;
    std::vector<int64_t> more_exposures;
    std::vector<std::string> more_kinds;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = root.add_subcommand(
      "experiment", "run one of the essay's claims as an experiment; write its JSON and plot");
  cmd->add_option("name", o->name,
                  fmt::format("{} (the report runs them all, in this order)",
                              fmt::join(experiment_names(), ", ")))
      ->required();
  std::string footer = "Experiments:";
  for (const ExperimentRow& row : experiment_rows())
    footer += fmt::format("\n  {:<14} {}", row.name, row.claim);
  cmd->footer(footer);
  cmd->add_option("--out", o->out, "folder for the JSON, the plot and runs/")->required();
  cmd->add_flag("--quick", o->quick, "fewer points, seeds and steps (rough numbers)");
  cmd->add_option("--steps", o->steps, "training steps of every run (0: the experiment's own)")
      ->capture_default_str();
  cmd->add_option("--more-exposures", o->more_exposures,
                  "facts: exposures per fact at which --more-kinds are trained again, e.g. "
                  "256,512,1024 (default: 2x and 4x the ranking's 128; quick: 2x its 64)")
      ->delimiter(',');
  cmd->add_option("--more-kinds", o->more_kinds,
                  "facts: the kinds trained longer, e.g. glu-silu,mlp-relu, or all (default: the "
                  "best)")
      ->delimiter(',');
  cmd->add_flag("--quiet", o->quiet, "no progress on stderr");
  add_device_option(cmd, o->device);
  cmd->callback([o, &action] {
    ExperimentConfig config;
    config.name = o->name;
    config.out_dir = o->out;
    config.quick = o->quick;
    config.run.progress = !o->quiet;
    config.steps = o->steps;
    config.more_exposures = o->more_exposures;
    config.more_kinds = o->more_kinds;
    config.run.device = parse_device(o->device);
    config.run.stop = stop_on_signal();
    config.validate();
    check_output_dir("--out", o->out);
    action = [config] {
      return run_stoppable(
          [&] {
            const ExperimentResult r = run_experiment(config);
            const std::filesystem::path out(config.out_dir);
            fmt::print("# {}\n\n{}\n{}\n{}({:.0f} s)\n", r.title, r.markdown,
                       (out / r.json).string(),
                       r.plot.empty() ? "" : (out / r.plot).string() + "\n", r.seconds);
            return 0;
          },
          "the same command resumes the runs in --out");
    };
  });
}

}  // namespace recall::cli
