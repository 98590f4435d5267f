// `recall ... --nproc N`: the ranks of one run started on this host, as torchrun starts them,
// around a store that the launcher serves (recall/train/distributed.h says how the ranks meet).
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace recall {

// The TCP store where the ranks of one run meet, served by their launcher (as torchrun's agent
// serves it) on a port of 127.0.0.1 that the kernel picks as it binds, so that runs started side
// by side cannot race for a port. Ranks started with env() connect to it rather than serve one.
class RunStore {
 public:
  // Throws UsageError in a build without c10d.
  RunStore(int world_size, std::chrono::milliseconds timeout);
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;
  int port() const;
  // MASTER_ADDR=127.0.0.1, MASTER_PORT=port() and TORCHELASTIC_USE_AGENT_STORE=True.
  std::vector<std::string> env() const;
  // Whether rank `rank` has come to the meeting.
  bool joined(int rank) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `recall ... --nproc N`: runs this very command line again as N processes on this host (without
// --nproc, with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE set, and the environment of a
// RunStore it serves), forwards SIGINT and SIGTERM to them and waits. When one fails, the others
// get `timeout` to exit on their own (they notice the broken collective) and are then killed.
// Returns 0 when all succeed, else the first failing rank's exit code (128 + signal when killed).
int launch_local(int nproc, std::chrono::milliseconds timeout);

}  // namespace recall
