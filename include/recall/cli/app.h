// The recall command line apart from main(): the binary and the command-line fuzzer build the same
// one. Not installed: its commands are linked into the binary alone.
#pragma once
#include <functional>

namespace CLI {
class App;
}

namespace recall::cli {

// The work of the chosen subcommand, run after parsing (so that --threads is applied first); it
// returns the process exit code.
using Action = std::function<int()>;

// The whole command line: --threads (into `threads`), --quiet and every subcommand; the chosen
// one's work into `action`.
void add_commands(CLI::App& app, Action& action, int& threads);

}  // namespace recall::cli
