// The recall command line, built apart from main() so that the fuzzer parses the same one.
#include "commands.h"

namespace recall::cli {

void add_commands(CLI::App& app, Action& action, int& threads) {
  app.require_subcommand(1);
  app.fallthrough();  // --threads may come after the subcommand
  app.add_option("--threads", threads, "intra-op threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  add_theory(app, action);
  add_probe(app, action);
  add_bench(app, action);
  add_train(app, action);
  add_eval(app, action);
  add_sample(app, action);
  add_fit(app, action);
  add_inspect(app, action);
  add_extrapolate(app, action);
  add_report(app, action);
}

}  // namespace recall::cli
