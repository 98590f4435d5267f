#include "commands.h"
namespace recall::cli {
void add_theory(CLI::App& root, Action& action) {}
void add_probe(CLI::App& root, Action& action) {}
void add_bench(CLI::App& root, Action& action) {
  auto* bench = root.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  add_bench_train(*bench, action);
}
}  // namespace recall::cli
