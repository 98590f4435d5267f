// The launcher's store and `--nproc`'s local launcher (see recall/train/launch_local.h).
#include "recall/train/launch_local.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>
#include <vector>

#include "c10d.h"
#include "recall/core/error.h"
#include "recall/core/signals.h"
#include "recall/core/spawn.h"
#include "recall/train/distributed.h"

namespace recall {

struct RunStore::Impl {
#ifdef RECALL_HAVE_C10D
  c10::intrusive_ptr<c10d::TCPStore> store;
#endif
};

RunStore::RunStore(int world_size, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
#ifdef RECALL_HAVE_C10D
  c10d::TCPStoreOptions so;
  so.port = 0;  // the kernel picks a free one as it binds: nothing can take it in between
  so.isServer = true;
  so.numWorkers = static_cast<std::size_t>(world_size);
  so.waitWorkers = false;  // the ranks meet on their own (DataParallelGroup), naming the missing
  so.timeout = timeout;
#if TORCH_VERSION_MAJOR >= 2
  so.useLibUV = false;
#endif
  impl_->store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
#else
  (void)timeout;
  throw UsageError(fmt::format(
      "{} processes: this build of recall has no c10d backend (Gloo's headers, Debian's "
      "libgloo-dev, were missing when it was configured); install it and rebuild, or run one "
      "process",
      world_size));
#endif
}

RunStore::~RunStore() = default;

int RunStore::port() const {
#ifdef RECALL_HAVE_C10D
  return impl_->store->getPort();
#else
  return 0;
#endif
}

std::vector<std::string> RunStore::env() const {
  return {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port()),
          "TORCHELASTIC_USE_AGENT_STORE=True"};
}

bool RunStore::joined(int rank) const {
#ifdef RECALL_HAVE_C10D
  return impl_->store->check({joined_key(rank)});
#else
  (void)rank;
  return false;
#endif
}

namespace {

// This process's command line, as it was started.
std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::string> args;
  std::string cur;
  for (char c : all) {
    if (c == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return args;
}

}  // namespace

int launch_local(int nproc, std::chrono::milliseconds timeout) {
  check_arg(nproc >= 1 && nproc <= 1024, fmt::format("--nproc {}: must be in [1, 1024]", nproc));
  if (const char* w = std::getenv("WORLD_SIZE"); w && *w)
    throw UsageError(
        fmt::format("--nproc {}: WORLD_SIZE={} is set already (a launcher started this process); "
                    "drop --nproc or unset WORLD_SIZE",
                    nproc, w));
  std::vector<std::string> args;
  const auto own = own_command_line();
  for (size_t i = 0; i < own.size(); ++i) {
    if (own[i] == "--nproc") {
      ++i;
      continue;
    }
    if (own[i].rfind("--nproc=", 0) == 0) continue;
    args.push_back(own[i]);
  }
  args.at(0) = "/proc/self/exe";  // this very binary, even when its file was replaced since
  // Served here, as torchrun's agent serves it, so that it outlives any rank (the survivors of a
  // dead rank 0 can still name it) and its port is chosen by the kernel as it binds.
  std::optional<RunStore> store;
  if (nproc > 1) store.emplace(nproc, timeout);
  SignalRelay signals;  // the ranks lead their own process groups: signals reach them from here
  const pid_t launcher = ::getpid();

  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    SpawnOptions o;
    o.own_group = true;
    o.env = {"RANK=" + std::to_string(r), "LOCAL_RANK=" + std::to_string(r),
             "WORLD_SIZE=" + std::to_string(nproc), "LOCAL_WORLD_SIZE=" + std::to_string(nproc),
             std::string(kLauncherPidEnv) + "=" + std::to_string(launcher)};
    if (store)
      for (const auto& e : store->env()) o.env.push_back(e);
    try {
      pids.push_back(spawn(args, o).pid);
    } catch (const std::runtime_error& e) {
      for (pid_t pid : pids) {
        ::kill(pid, SIGKILL);
        wait_child(pid);
      }
      throw std::runtime_error(fmt::format("--nproc: {}", e.what()));
    }
  }

  std::vector<bool> done(pids.size(), false);
  size_t running = pids.size();
  int first_failure = 0;
  int passed_on = 0;  // the first SIGINT or SIGTERM passed on to the ranks
  std::chrono::steady_clock::time_point deadline{};
  while (running > 0) {
    bool reaped = false;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (done[r]) continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --running;
      reaped = true;
      const int code = exit_code(status);
      if (code != 0 && first_failure == 0) {
        first_failure = code;
        deadline = std::chrono::steady_clock::now() + timeout + std::chrono::seconds(10);
        if (passed_on == 0 || code != 128 + passed_on)  // not a rank stopped as it was asked
          std::fprintf(stderr,
                       "error: --nproc: rank %zu exited with code %d; waiting up to %.0f s "
                       "for the other ranks\n",
                       r, code, timeout.count() / 1000.0 + 10);
      }
    }
    std::vector<pid_t> live;
    for (size_t r = 0; r < pids.size(); ++r)
      if (!done[r]) live.push_back(pids[r]);
    passed_on = signals.relay(live);
    if (first_failure != 0 && running > 0 && std::chrono::steady_clock::now() > deadline) {
      for (size_t r = 0; r < pids.size(); ++r)
        if (!done[r]) ::kill(pids[r], SIGKILL);
    }
    if (!reaped && running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return first_failure;
}

}  // namespace recall
