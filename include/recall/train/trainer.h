// The training loop: one step is the data-parallel backward (recall/train/data_parallel.h), a
// global gradient-norm clip and the fused AdamW (recall/ops/fused_adamw.h), with warmup then
// cosine decay of the learning rate; periodic evaluation, metrics as JSON lines
// (DIR/metrics.jsonl), a progress line on stderr, and checkpoints (DIR/checkpoint.bin) from which
// --resume continues exactly: the same losses as a run that never stopped, given the same thread
// count. Started as several processes (torchrun's environment, recall/train/distributed.h), each
// trains on its slice of the batch with gradients summed across them; rank 0 alone evaluates and
// writes the folder, and --resume needs the same number of processes. At each evaluation that
// lowers the validation loss, the state is also written to DIR/best.bin.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "recall/core/step_profile.h"
#include "recall/models/transformer.h"
#include "recall/train/distributed.h"
#include "recall/train/task.h"
#include "recall/train/train_config.h"

namespace recall {

// Learning rate after `step` optimizer steps: linear warmup to lr, then cosine decay to min_lr.
double lr_at(const TrainerConfig& config, int64_t step);

// A loss or gradient norm that is not finite. The message names the step; no checkpoint is written
// from the bad state, so the last good one stays.
class NonFiniteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrainOptions {
  std::string out_dir;       // holds checkpoint.bin, best.bin, metrics.jsonl, config.toml
  bool resume = false;       // continue from out_dir/checkpoint.bin (its config must match)
  bool reuse = false;        // resume when out_dir holds a run (a finished one is only evaluated)
  bool progress = true;      // the progress line on stderr
  bool print_config = true;  // with progress: the resolved config on stderr at start
  // Where the model and its batches live (recall/core/device.h). Not part of the config: a run
  // resumes on any device, and the checkpoint loads on any device.
  torch::Device device = torch::kCPU;
  // Refuse the run up front when its estimated RAM exceeds this many bytes (> 0), or else what
  // the machine has free (recall/core/machine.h check_ram).
  int64_t max_ram = 0;
  // Polled after every step; a non-zero value stops the run after a checkpoint (a signal number
  // from the CLI, or any value a caller chooses).
  std::function<int(int64_t step)> stop;
  // With WORLD_SIZE > 1 in the environment (recall/train/distributed.h): how long a rank waits
  // for the others before it fails.
  double dist_timeout_s = kDefaultDistTimeoutSeconds;
  // Record every other step past the warm-up (the 2nd, 4th, ... timed step) into
  // TrainResult::profile (recall/core/step_profile.h); the steps between run unrecorded.
  bool profile = false;
};

struct TrainResult {
  int64_t step = 0;                    // steps taken in total
  std::vector<double> losses;          // training loss of each step taken in this call
  std::vector<double> step_seconds;    // wall time of each of those steps (batch to update)
  std::vector<bool> profiled;          // whether each of those steps was recorded (profile)
  StepProfile profile;                 // the recorded steps' parts, summed over them
  double peak_flops = 0;               // the FLOP rate MFU was measured against
  std::string peak_kind;               // "measured", "theoretical" or "config" (peak_flops set)
  std::map<std::string, double> eval;  // last evaluation (only when the run finished)
  int stopped_by = 0;                  // the non-zero value of options.stop, or 0
};

// The first steps of a call are warm-up (allocations, first-touch pages), left out of throughput.
constexpr size_t kWarmupSteps = 2;

// Mean of step_seconds past the warm-up steps (all of them when there are no more); 0 when empty.
// The metrics' tokens_per_s and mfu are tokens_per_step over it.
double mean_step_seconds(const std::vector<double>& step_seconds);

// Trains `config` (validated) into options.out_dir. Throws UsageError for bad input found before
// training (unwritable folder, an existing run without --resume, a checkpoint that does not match)
// and NonFiniteError as above.
TrainResult train(const TrainConfig& config, const TrainOptions& options);

// How a command that trains on its way to a measurement (experiment, extrapolate, report) runs
// each of its trainings.
struct RunContext {
  bool progress = true;  // the progress line on stderr (the config is not printed)
  torch::Device device = torch::kCPU;
  std::function<int(int64_t step)> stop;  // TrainOptions::stop
};

// Trains `config` into `out_dir`, resuming or reusing a run found there. A stop request ends the
// call with StopRequested (recall/core/signals.h) naming the run, after its checkpoint.
TrainResult train_run(const TrainConfig& config, const std::string& out_dir,
                      const RunContext& context);

// Sets up the task for `config`, fixing vocab_size where the task decides it (text); `max_ram`
// bounds the corpus's RAM (make_task).
std::unique_ptr<Task> resolve_task(TrainConfig& config, const std::vector<int64_t>& vocabulary = {},
                                   int64_t max_ram = 0);

// The batch's tensors on `device`.
Batch to_device(const Batch& batch, const torch::Device& device);

// Mean cross-entropy and accuracy over the scored positions of `set` (on any device: each batch
// goes to the model's), summarised by the task.
std::map<std::string, double> evaluate(Transformer& model, const Task& task,
                                       const std::vector<Batch>& set);

// Checks that `ckpt` was written for `config`; throws UsageError naming the first differing key.
void check_checkpoint_config(const TrainConfig& config, const std::string& ckpt_toml,
                             const std::string& source);

// A trained model restored from a checkpoint for evaluation or sampling: a run folder gives its
// last checkpoint (RUN/checkpoint.bin), a file path that file, so RUN/best.bin is the best one.
struct Restored {
  TrainConfig config;
  int64_t step = 0;
  std::vector<int64_t> vocabulary;  // text: id -> byte or codepoint
  Transformer model{nullptr};
};
// The model is read on the CPU, then moved to `device`.
Restored restore(const std::string& path, const torch::Device& device = torch::kCPU);

}  // namespace recall
