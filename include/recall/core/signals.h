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
// where they are ordinary events, not interruptions. So too Ctrl-Z (SIGTSTP, which still stops the
// process) and fg (SIGCONT), so that a SignalRelay can pass them on.
#pragma once
#include <spawn.h>
#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace recall {

// Blocks those signals in the calling thread and starts the thread that receives them. Call
// it before any other thread starts (only threads started later inherit the mask); later calls do
// nothing. Until install_stop_signals() or a SignalRelay, a signal ends the process by its default
// action, as if nothing caught it.
void start_signal_thread();
// That thread's name (/proc/PID/task/TID/comm, gdb's thread list).
inline constexpr const char* kSignalThreadName = "recall-signals";

// From now on the first SIGINT or SIGTERM is recorded (stop_signal()) and a second ends the
// process. Starts the signal thread if main did not.
void install_stop_signals();
// The signal received since install_stop_signals(), or 0.
int stop_signal();

// For a process that starts others (the --nproc launcher, sweep), each leading its own process
// group so that a terminal's signals reach them once, through here, not twice. While a relay lives,
// no SIGINT or SIGTERM ends this process: relay() passes each on to the children (the first stops
// them after a checkpoint, a second ends them at once), and so Ctrl-Z (SIGTSTP, after which this
// process stops too) and fg (SIGCONT).
class SignalRelay {
 public:
  SignalRelay();
  ~SignalRelay();  // back to the default: a signal ends the process
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;
  // Passes on what arrived since the last call (two of a kind as one, as a pending signal merges).
  // Call it every few ms. Returns the first SIGINT or SIGTERM passed on so far, or 0.
  int relay(const std::vector<pid_t>& children);

 private:
  int count_ = 0, pauses_ = 0, resumes_ = 0, first_ = 0;
};

// For posix_spawn (recall/core/spawn.h): `attr` (initialised by the caller) gives the child
// SIGINT, SIGTERM, SIGTSTP and SIGCONT unblocked and at their default action, as a program started
// from a shell has them, and with `own_group` a process group of its own, for a SignalRelay to
// pass signals to.
void reset_signals_on_spawn(posix_spawnattr_t& attr, bool own_group);

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
