// recall sweep: the flags of the sweep engine (recall/experiments/sweep.h), its summary CSV on
// stdout, and its end as an exit code: 128 + the signal that stopped it, 1 when a run failed.
#include <fmt/format.h>

#include <cstdio>

#include "commands.h"
#include "output.h"
#include "recall/core/io.h"
#include "recall/experiments/sweep.h"

namespace recall::cli {

namespace {

int sweep(const SweepConfig& config) {
  SweepConfig c = config;
  c.progress = !quiet();
  const SweepResult r = run_sweep(c);
  if (r.stop_signal) {
    fmt::print(stderr,
               "sweep stopped by signal {}: {} of {} runs finished; run the same command again to "
               "continue\n",
               r.stop_signal, r.finished, r.runs);
    return 128 + r.stop_signal;
  }
  if (!r.failures.empty()) {
    for (const auto& f : r.failures) fmt::print(stderr, "error: sweep run {}\n", f);
    return 1;
  }
  std::fputs(r.csv.c_str(), stdout);
  return 0;
}

}  // namespace

void add_sweep(CLI::App& root, Action& action) {
  auto args = std::make_shared<SweepConfig>();
  auto* cmd = root.add_subcommand(
      "sweep", "train one run per point of a grid of config values; rerun to resume");
  cmd->add_option("--config", args->config, "a recipe of train/ or a TOML file, e.g. mqar-tiny")
      ->required();
  cmd->add_option("--grid", args->grid, "key=value1,value2,... (repeatable: the product)")
      ->required();
  cmd->add_option("--set", args->sets, "override a config key in every run: --set key=value");
  cmd->add_option("--seeds", args->seeds, "runs per point, seeds seed, seed+1, ...")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--out", args->out, "folder: one run folder per point, summary.csv/json")
      ->required();
  cmd->add_option("--jobs", args->jobs, "runs at a time (the threads are shared among them)")
      ->check(CLI::Range(1, 256));
  cmd->callback([args, &action] {
    check_output_dir("--out", args->out);
    action = [args] { return sweep(*args); };
  });
}

}  // namespace recall::cli
