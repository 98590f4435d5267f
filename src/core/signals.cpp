#include "recall/core/signals.h"

#include <csignal>

namespace recall {
namespace {
volatile std::sig_atomic_t g_signal = 0;

// Only async-signal-safe calls: sigaction and raise.
void on_stop_signal(int sig) {
  if (g_signal != 0) {  // the second one: no more waiting for the checkpoint
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    raise(sig);  // delivered as soon as this handler returns
    return;
  }
  g_signal = sig;
}
}  // namespace

void install_stop_signals() {
  g_signal = 0;
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  action.sa_flags =
      SA_RESTART;  // a system call the signal interrupts resumes: not every library retries EINTR
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int stop_signal() {
  return g_signal;
}

}  // namespace recall
