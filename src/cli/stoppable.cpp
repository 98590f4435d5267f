// What the commands that do long work share (commands.h): the stop signals, --max-memory.
#include <fmt/format.h>

#include "commands.h"
#include "recall/core/machine.h"
#include "recall/core/signals.h"

namespace recall::cli {

int run_stoppable(const std::function<int()>& work, const std::string& resume) {
  install_stop_signals();
  try {
    return work();
  } catch (const StopRequested& e) {
    fmt::print(stderr, "{}; {}\n", e.what(), resume);
    return 128 + e.signal();
  }
}

std::function<int(int64_t)> stop_on_signal() {
  return [](int64_t) { return stop_signal(); };
}

void add_max_ram(CLI::App* cmd, int64_t& bytes) {
  cmd->add_option_function<std::string>(
      "--max-memory",
      [&bytes](const std::string& text) { bytes = parse_byte_size("--max-memory", text); },
      "refuse to start when the estimated memory exceeds this (e.g. 4G; default: what the "
      "machine has free)");
}

}  // namespace recall::cli
