// The recall command line, built apart from main() so that the fuzzer parses the same one.
#include "recall/cli/app.h"

#include "commands.h"
#include "output.h"

namespace recall::cli {

void add_commands(CLI::App& app, Action& action, int& threads) {
  app.require_subcommand(1);
  app.fallthrough();  // --threads may come after the subcommand
  app.add_option("--threads", threads,
                 "intra-op threads (default: OMP_NUM_THREADS, else the CPUs allowed by affinity "
                 "and the cgroup quota)")
      // each thread costs start-up time whatever the work: 100,000 of them would run for hours
      ->check(number_in(0, 1024, "in [0, 1024]"));
  app.add_flag("--quiet", quiet(), "no progress or notes on stderr");
  add_theory(app, action);
  add_probe(app, action);
  add_bench(app, action);
  add_train(app, action);
  add_eval(app, action);
  add_sample(app, action);
  add_fit(app, action);
  add_inspect(app, action);
  add_extrapolate(app, action);
  add_forecast(app, action);
  add_experiment(app, action);
  add_report(app, action);
  add_export(app, action);
  add_import(app, action);
  add_sweep(app, action);
  add_plot(app, action);
}

}  // namespace recall::cli
