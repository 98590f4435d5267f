// Data parallelism across processes and hosts on c10d, LibTorch's own distributed engine: Gloo on
// the CPU, NCCL for CUDA tensors in a build with CUDA.
//
// Launch follows torchrun's environment: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT; rank 0 serves a TCPStore at MASTER_ADDR:MASTER_PORT where the ranks
// meet, unless TORCHELASTIC_USE_AGENT_STORE=True says the launcher serves it (torchrun's agent,
// --nproc). After a failed collective each rank leaves word in the store, so the survivors name
// the ranks that died or hung. GLOO_SOCKET_IFNAME names the network interface Gloo binds (needed
// across hosts whose host name does not resolve to the address the others reach them at).
//
// One step with W ranks: every rank draws the same global batch of B rows from the shared task
// generator (token ids: cheap) and trains on its rows [B r / W, B (r + 1) / W); its loss is its
// scored cross-entropy sum over the global batch's scored count, so the ranks' losses and
// gradients add up to the single-process ones. Gradients are summed across ranks by all-reduce in
// buckets of parameters (in reverse registration order, roughly the order backward produces
// them), each launched asynchronously as soon as its gradients are ready and all earlier buckets
// are launched, so that every rank issues the same collectives in the same order. What overlaps:
// with one worker thread per rank, each bucket's all-reduce runs on c10d's threads while autograd
// computes the rest of the backward; with several worker threads, the gradients exist only once
// every worker is done, and a bucket's all-reduce overlaps only the summing of the workers'
// gradients for the buckets after it.
// The summed gradients are the same bytes on every rank, so the clip and AdamW keep the ranks'
// parameters identical without any broadcast.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "recall/core/step_profile.h"
#include "recall/core/torch.h"
#include "recall/models/transformer.h"
#include "recall/train/task.h"

namespace recall {

// The default of --dist-timeout: how long a rank waits for the others (to meet, and in every
// collective) before it gives up with an error.
constexpr double kDefaultDistTimeoutSeconds = 300;

// Set by launch_local (recall/train/launch_local.h) in each rank's environment: the launcher's
// process id. A rank that has it ends with its launcher, as a SIGTERM (a stop request), even one
// killed outright.
inline constexpr const char* kLauncherPidEnv = "RECALL_LAUNCHER_PID";

// The store key that rank `rank` sets when it comes to the meeting.
std::string joined_key(int rank);

// torchrun's environment variables.
struct DistEnv {
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// Reads the variables; WORLD_SIZE unset or 1 is one process. Throws UsageError naming a variable
// that is malformed or out of range, or LOCAL_RANK or LOCAL_WORLD_SIZE set without the other.
DistEnv dist_env_from_environment();

// Intra-op threads for this process when none were asked for: the default thread count shared
// out among LOCAL_WORLD_SIZE processes on this host; 0 (the default) without it or when
// OMP_NUM_THREADS is set (torchrun sets it).
int threads_per_local_rank();

// Rows [first, second) of a global batch of B rows that rank `rank` of `world` trains on:
// [B rank / world, B (rank + 1) / world), so the ranks' rows tile the batch in order.
std::pair<int64_t, int64_t> batch_rows(int64_t B, int rank, int world);

// A collective failed: a peer died, hung past the timeout or could not be reached.
class DistributedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The ranks of one training run. world_size 1: no process group, and every method is a no-op.
class DataParallelGroup {
 public:
  // Meets the other ranks (throws DistributedError when they do not come within `timeout`).
  // `device` is where the gradients live: NCCL for CUDA (in a build with CUDA), Gloo otherwise.
  DataParallelGroup(const DistEnv& env, std::chrono::milliseconds timeout, torch::Device device);
  ~DataParallelGroup();
  DataParallelGroup(const DataParallelGroup&) = delete;
  DataParallelGroup& operator=(const DataParallelGroup&) = delete;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool distributed() const { return env_.world_size > 1; }

  // One step's backward on this rank's slice of `global` with `workers` threads (as
  // data_parallel_backward), then the gradients summed over the ranks into every parameter's .grad.
  // `stop` is this rank's stop request (0: none); all ranks learn every rank's request in the same
  // collective, and agreed_stop() is the first non-zero one, so all ranks stop after the same step.
  // Returns the global batch's loss. Throws DistributedError when a collective fails. `profile`,
  // when given, gains this rank's forward and backward parts (as data_parallel_backward's).
  double backward(Transformer& model, const Batch& global, int workers, int stop,
                  StepProfile* profile = nullptr);
  int agreed_stop() const { return agreed_stop_; }

 private:
  class Impl;
  DistEnv env_;
  std::unique_ptr<Impl> impl_;
  int agreed_stop_ = 0;
};

}  // namespace recall
