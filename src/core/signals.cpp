#include "recall/core/signals.h"

#include <pthread.h>
#include <unistd.h>

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
std::atomic<int> g_count{0};  // every SIGINT and SIGTERM received
std::atomic<int> g_last{0};
std::atomic<int> g_pauses{0}, g_resumes{0};  // SIGTSTP and SIGCONT received under a relay
// The signals the process started with ignored (as `cmd &` in a script starts it with SIGINT):
// outside a relay or a training run's stop they stay ignored.
bool g_ignored[NSIG] = {};

// What the signal thread receives: the stop signals, and Ctrl-Z and fg (which a relay passes on).
constexpr int kReceived[] = {SIGINT, SIGTERM, SIGTSTP, SIGCONT};

sigset_t received_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kReceived) sigaddset(&set, sig);
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
  pthread_setname_np(pthread_self(), kSignalThreadName);
  const sigset_t set = received_set();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    const int mode = g_mode.load();
    // A signal the process started with ignored stays ignored unless recall asked for it: a relay
    // passes everything on, a training run honours SIGINT and SIGTERM.
    const bool asked = mode == kForward || (mode == kStop && (sig == SIGINT || sig == SIGTERM));
    if (g_ignored[sig] && !asked) continue;
    if (sig == SIGTSTP || sig == SIGCONT) {
      if (mode == kForward)
        ++(sig == SIGTSTP ? g_pauses : g_resumes);  // SignalRelay::relay() passes them on
      else if (sig == SIGTSTP)
        raise(SIGSTOP);  // SIGTSTP's default action: the whole process stops
      continue;          // SIGCONT has continued the process already, blocked or not
    }
    g_last = sig;  // before the count: a reader that sees the new count sees this signal
    ++g_count;
    if (mode == kForward) continue;
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
    for (int sig : kReceived) g_ignored[sig] = ignored(sig);
    const sigset_t set = received_set();
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
  count_ = g_count.load();
  pauses_ = g_pauses.load();
  resumes_ = g_resumes.load();
  g_mode = kForward;
}

SignalRelay::~SignalRelay() {
  g_mode = kDefault;
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

void reset_signals_on_spawn(posix_spawnattr_t& attr, bool own_group) {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  for (int sig : kReceived) sigdelset(&mask, sig);
  posix_spawnattr_setsigmask(&attr, &mask);
  short flags = 0;
  posix_spawnattr_getflags(&attr, &flags);
  flags |= POSIX_SPAWN_SETSIGMASK;
  if (own_group) {
    posix_spawnattr_setpgroup(&attr, 0);  // led by the child
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);
}

}  // namespace recall
