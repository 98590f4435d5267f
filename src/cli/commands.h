// Each subcommand lives in its own file and registers itself here. add_X(root, action) adds the
// subcommand and, when it is chosen, stores in `action` the work to run after parsing (so that
// --threads is applied first). The action returns the process exit code.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace recall::cli {

using Action = std::function<int()>;

void add_theory(CLI::App& root, Action& action);
void add_probe(CLI::App& root, Action& action);
void add_bench(CLI::App& root, Action& action);
// Adds `train` under the `bench` subcommand (recall/bench_train.h).
void add_bench_train(CLI::App& bench, Action& action);
void add_train(CLI::App& root, Action& action);
void add_eval(CLI::App& root, Action& action);
void add_sample(CLI::App& root, Action& action);
void add_fit(CLI::App& root, Action& action);
void add_inspect(CLI::App& root, Action& action);
void add_extrapolate(CLI::App& root, Action& action);
void add_report(CLI::App& root, Action& action);
void add_export(CLI::App& root, Action& action);
void add_sweep(CLI::App& root, Action& action);
void add_plot(CLI::App& root, Action& action);

}  // namespace recall::cli
