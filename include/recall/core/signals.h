// SIGINT and SIGTERM ask a training run to stop cleanly: the handler only records the signal; the
// loop finishes its step, writes a checkpoint and the CLI exits with 128 + the signal number.
#pragma once

namespace recall {
void install_stop_signals();
// The signal received since install_stop_signals(), or 0.
int stop_signal();
}  // namespace recall
