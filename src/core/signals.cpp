#include "recall/core/signals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <thread>

namespace recall {
namespace {

enum Mode : int { kDefault, kStop, kForward };

std::atomic<int> g_mode{kDefault};
std::atomic<int> g_stop{0};   // the first signal under kStop
std::atomic<int> g_count{0};  // every SIGINT and SIGTERM received
std::atomic<int> g_last{0};
std::atomic<int> g_pauses{0}, g_resumes{0};  // SIGTSTP and SIGCONT received under a relay
// Whether the process started with the signal ignored (as `cmd &` in a script starts it): then,
// by default, it stays ignored.
bool g_ignored_int = false, g_ignored_term = false;

sigset_t signal_set(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  return set;
}

sigset_t stop_set() {
  return signal_set({SIGINT, SIGTERM});
}

// The signal's default action, as if it had never been blocked: the process ends by it.
[[noreturn]] void end_by(int sig) {
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  const sigset_t one = signal_set({sig});
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);  // sent to this thread, which no longer blocks it: delivered before raise returns
  std::_Exit(128 + sig);
}

// Ctrl-Z and fg: under a SignalRelay they are received here to be passed on (the relay blocks them
// in its own thread too). Any other process blocks them in this thread alone, so they take their
// default actions on the others, or here, where they are done by hand.
sigset_t job_control_set() {
  return signal_set({SIGTSTP, SIGCONT});
}

void receive() {
  pthread_setname_np(pthread_self(), kSignalThreadName);
  const sigset_t job = job_control_set();
  pthread_sigmask(SIG_BLOCK, &job, nullptr);
  const sigset_t set = signal_set({SIGINT, SIGTERM, SIGTSTP, SIGCONT});
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGTSTP || sig == SIGCONT) {
      if (g_mode.load() == kForward)
        ++(sig == SIGTSTP ? g_pauses : g_resumes);  // SignalRelay::relay() passes them on
      else if (sig == SIGTSTP)
        raise(SIGSTOP);  // SIGTSTP's default action: the whole process stops
      continue;          // SIGCONT has continued the process already, whatever its mask
    }
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

SignalRelay::SignalRelay() {
  start_signal_thread();
  const sigset_t job = job_control_set();  // Ctrl-Z reaches the signal thread, not this one
  pthread_sigmask(SIG_BLOCK, &job, nullptr);
  count_ = g_count.load();
  pauses_ = g_pauses.load();
  resumes_ = g_resumes.load();
  g_mode = kForward;
}

SignalRelay::~SignalRelay() {
  g_mode = kDefault;
  const sigset_t job = job_control_set();
  pthread_sigmask(SIG_UNBLOCK, &job, nullptr);
}

int SignalRelay::relay(const std::vector<pid_t>& children) {
  auto pass_on = [&](int sig) {
    for (pid_t child : children) ::kill(child, sig);
  };
  if (const int count = g_count.load(); count != count_) {
    count_ = count;
    const int sig = g_last.load();  // written before the count
    if (first_ == 0) first_ = sig;
    pass_on(sig);
  }
  if (const int pauses = g_pauses.load(); pauses != pauses_) {
    pauses_ = pauses;
    pass_on(SIGTSTP);  // the children, then this process, stop
    ::kill(::getpid(), SIGSTOP);
  }
  if (const int resumes = g_resumes.load(); resumes != resumes_) {
    resumes_ = resumes;
    pass_on(SIGCONT);  // fg or bg: this process runs again
  }
  return first_;
}

void reset_signals_in_child() {
  const sigset_t set = stop_set(), job = job_control_set();
  sigprocmask(SIG_UNBLOCK, &set, nullptr);  // dispositions were never changed: exec resets them
  sigprocmask(SIG_UNBLOCK, &job, nullptr);
}

void reset_signals_on_spawn(posix_spawnattr_t& attr) {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  for (int sig : {SIGINT, SIGTERM, SIGTSTP, SIGCONT}) sigdelset(&mask, sig);
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setpgroup(&attr, 0);  // a group of its own, led by the child
  short flags = 0;
  posix_spawnattr_getflags(&attr, &flags);
  posix_spawnattr_setflags(
      &attr, static_cast<short>(flags | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP));
}

}  // namespace recall
