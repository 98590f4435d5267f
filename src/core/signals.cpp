#include "recall/core/signals.h"

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace recall {
namespace {

enum Mode : int { kDefault, kStop, kForward };

std::atomic<int> g_mode{kDefault};
std::atomic<int> g_stop{0};   // the first signal under kStop
std::atomic<int> g_count{0};  // every signal received
std::atomic<int> g_last{0};
// Whether the process started with the signal ignored (as `cmd &` in a script starts it): then,
// by default, it stays ignored.
bool g_ignored_int = false, g_ignored_term = false;

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// The signal's default action, as if it had never been blocked: the process ends by it.
[[noreturn]] void end_by(int sig) {
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);  // sent to this thread, which no longer blocks it: delivered before raise returns
  std::_Exit(128 + sig);
}

void receive() {
  const sigset_t set = stop_set();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    g_last = sig;  // before the count: a reader that sees the new count sees this signal
    ++g_count;
    const int mode = g_mode.load();
    if (mode == kForward) continue;
    if (mode == kDefault && (sig == SIGINT ? g_ignored_int : g_ignored_term)) continue;
    int none = 0;
    if (mode == kStop && g_stop.compare_exchange_strong(none, sig)) continue;
    end_by(sig);  // by default, or the second under kStop
  }
}

bool ignored(int sig) {
  struct sigaction now = {};
  sigaction(sig, nullptr, &now);
  return now.sa_handler == SIG_IGN;
}

}  // namespace

void start_signal_thread() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_ignored_int = ignored(SIGINT);
    g_ignored_term = ignored(SIGTERM);
    const sigset_t set = stop_set();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread(receive).detach();  // started after the block: it inherits it, as sigwait needs
  });
}

void install_stop_signals() {
  start_signal_thread();
  g_stop = 0;
  g_mode = kStop;
}

int stop_signal() {
  return g_stop.load();
}

ReceivedSignals received_signals() {
  ReceivedSignals r;
  r.count = g_count.load();
  r.last = g_last.load();
  return r;
}

ReceivedSignals forward_signals() {
  start_signal_thread();
  g_mode = kForward;
  return received_signals();
}

void default_signals() {
  g_mode = kDefault;
}

void reset_signals_in_child() {
  const sigset_t set = stop_set();
  sigprocmask(SIG_UNBLOCK, &set, nullptr);  // dispositions were never changed: exec resets them
}

void reset_signals_on_spawn(posix_spawnattr_t& attr) {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  sigdelset(&mask, SIGINT);
  sigdelset(&mask, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &mask);
  short flags = 0;
  posix_spawnattr_getflags(&attr, &flags);
  posix_spawnattr_setflags(&attr, static_cast<short>(flags | POSIX_SPAWN_SETSIGMASK));
}

}  // namespace recall
