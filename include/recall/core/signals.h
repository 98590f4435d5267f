// SIGINT and SIGTERM ask a training run to stop cleanly: the loop finishes its step, writes a
// checkpoint and the CLI exits with 128 + the signal number. A second SIGINT or SIGTERM while the
// first is being honoured ends the process at once (the signal's default action), as a second
// Ctrl-C does elsewhere.
//
// Neither signal is ever delivered to a thread that computes. oneDNN's JIT sgemm, which the fast
// GEMMs call, points the stack pointer into a heap buffer while it runs (fixed in oneDNN 3.11.1;
// Debian's LibTorch 1.13 carries an older one), so the kernel pushes the frame of a signal that
// interrupts it onto the heap: glibc then aborted about 1 training run in 8 stopped by SIGTERM.
// start_signal_thread(), first thing in main, blocks both signals in the calling thread, which
// every thread started afterwards inherits, and receives them on one thread of its own (sigwait),
// where they are ordinary events, not interruptions.
#pragma once
#include <spawn.h>

#include <stdexcept>
#include <string>

namespace recall {

// Blocks SIGINT and SIGTERM in the calling thread and starts the thread that receives them. Call
// it before any other thread starts (only threads started later inherit the mask); later calls do
// nothing. Until install_stop_signals() or forward_signals(), a signal ends the process by its
// default action, as if nothing caught it.
void start_signal_thread();
// That thread's name (/proc/PID/task/TID/comm, gdb's thread list).
inline constexpr const char* kSignalThreadName = "recall-signals";

// From now on the first SIGINT or SIGTERM is recorded (stop_signal()) and a second ends the
// process. Starts the signal thread if main did not.
void install_stop_signals();
// The signal received since install_stop_signals(), or 0.
int stop_signal();

// For a launcher of other processes: from now on every SIGINT or SIGTERM is counted, none ends the
// process; the launcher passes each on. So are SIGTSTP (Ctrl-Z), after which the launcher stops
// itself, and SIGCONT. Returns how many arrived before, to compare with later. Call it from the
// thread that launches.
struct ReceivedSignals {
  int count = 0;                // SIGINT and SIGTERM since the process started
  int last = 0;                 // the latest one's number
  int pauses = 0, resumes = 0;  // SIGTSTP and SIGCONT since forward_signals()
};
ReceivedSignals forward_signals();
ReceivedSignals received_signals();
// Back to the default: a signal ends the process.
void default_signals();

// In a child between fork and exec (async-signal-safe): SIGINT, SIGTERM, SIGTSTP and SIGCONT
// unblocked and at their default action, as a program started from a shell has them.
void reset_signals_in_child();
// The same for posix_spawn: `attr` (initialised by the caller) gives the child that signal state.
void reset_signals_on_spawn(posix_spawnattr_t& attr);

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
