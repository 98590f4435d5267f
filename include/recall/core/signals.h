// SIGINT and SIGTERM ask a training run to stop cleanly: the handler only records the signal; the
// loop finishes its step, writes a checkpoint and the CLI exits with 128 + the signal number. A
// second SIGINT or SIGTERM while the first is being honoured ends the process at once (the
// signal's default action), as a second Ctrl-C does elsewhere.
#pragma once
#include <stdexcept>
#include <string>

namespace recall {
void install_stop_signals();
// The signal received since install_stop_signals(), or 0.
int stop_signal();

// Thrown by work made of several training runs (extrapolate, report) when a stop signal ended
// one of them after its checkpoint: the rest is skipped, and the same command resumes it. The CLI
// exits with 128 + signal().
class StopRequested : public std::runtime_error {
 public:
  StopRequested(int signal, const std::string& where)
      : std::runtime_error("stopped by signal " + std::to_string(signal) + " (" + where + ")"),
        signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};
}  // namespace recall
