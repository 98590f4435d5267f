// Starting child processes: one helper for every program recall runs (training runs of a sweep,
// gnuplot, a PyTorch peer). A child starts with the signal state a shell would give it (recall
// blocks SIGINT and SIGTERM in every thread, recall/core/signals.h, and a child would inherit
// that), its stdout and stderr where the options say; the launcher of distributed ranks and the
// tests start theirs with it too.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace recall {

struct SpawnOptions {
  std::string stdout_file;     // empty: inherited; else created or truncated
  bool stdout_pipe = false;    // stdout to a pipe read from Child::stdout_fd (over stdout_file)
  std::string stderr_file;     // empty: inherited
  bool stderr_append = false;  // append to stderr_file instead of truncating it
  // A process group of its own, for a SignalRelay to pass signals to; else a terminal's Ctrl-C
  // ends it with recall.
  bool own_group = false;
  // "NAME=value" entries set in the child's environment, over recall's own; empty: recall's.
  std::vector<std::string> env;
};

struct Child {
  pid_t pid = -1;
  int stdout_fd = -1;  // the read end of the stdout pipe (the caller closes it), or -1
};

// Starts argv[0] (searched on PATH when it holds no '/') with `argv`. Throws std::runtime_error
// "cannot start <program>: <reason>" when it cannot (no such program, not executable, a file that
// cannot be opened).
Child spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});

// The exit code of a waitpid() status: the child's own, or 128 + the signal that ended it.
int exit_code(int wait_status);

// Waits for `pid` to end (retrying after interruptions); its exit_code().
int wait_child(pid_t pid);

// Runs argv to its end, its stdout collected into `out`; returns the exit code. Throws as spawn.
int run_capture(const std::vector<std::string>& argv, std::string& out);

}  // namespace recall
