// The training loop: one step is the data-parallel backward (recall/train/data_parallel.h), a
// global gradient-norm clip and the fused AdamW (recall/train/adamw.h), with warmup then cosine
// decay of the learning rate; periodic evaluation, metrics as JSON lines (DIR/metrics.jsonl), a
// progress line on stderr, and checkpoints (DIR/checkpoint.bin) from which --resume continues
// exactly: the same losses as a run that never stopped, given the same thread count. Started as
// several processes (torchrun's environment, recall/train/distributed.h), each trains on its slice
// of the batch with gradients summed across them; rank 0 alone evaluates and writes the folder, and
// --resume needs the same number of processes.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "recall/models/model.h"
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
  std::string out_dir;       // holds checkpoint.bin, metrics.jsonl, config.toml
  bool resume = false;       // continue from out_dir/checkpoint.bin (its config must match)
  bool reuse = false;        // resume when out_dir holds a run (a finished one is only evaluated)
  bool progress = true;      // the progress line on stderr
  bool print_config = true;  // with progress: the resolved config on stderr at start
  // Polled after every step; a non-zero value stops the run after a checkpoint (a signal number
  // from the CLI, or any value a caller chooses).
  std::function<int(int64_t step)> stop;
  // With WORLD_SIZE > 1 in the environment (recall/train/distributed.h): how long a rank waits
  // for the others before it fails.
  double dist_timeout_s = kDefaultDistTimeoutSeconds;
};

struct TrainResult {
  int64_t step = 0;                    // steps taken in total
  std::vector<double> losses;          // training loss of each step taken in this call
  std::vector<double> step_seconds;    // wall time of each of those steps (batch to update)
  double peak_flops = 0;               // the FLOP rate MFU was measured against
  std::map<std::string, double> eval;  // last evaluation (only when the run finished)
  int stopped_by = 0;                  // the non-zero value of options.stop, or 0
};

// Tokens a step trains on: batch_size x seq_len (facts: batch_size x 2).
int64_t tokens_per_step(const TrainConfig& config);

// FLOPs per trained token, 6 N + 12 L d T (nanoGPT's estimate) for a model of n_params.
double flops_per_token(const TrainConfig& config, int64_t n_params);

// The first steps of a call are warm-up (allocations, first-touch pages), left out of throughput.
constexpr size_t kWarmupSteps = 2;

// Mean of step_seconds past the warm-up steps (all of them when there are no more); 0 when empty.
// The metrics' tokens_per_s and mfu are tokens_per_step over it.
double mean_step_seconds(const std::vector<double>& step_seconds);

// Trains `config` (validated) into options.out_dir. Throws UsageError for bad input found before
// training (unwritable folder, an existing run without --resume, a checkpoint that does not match)
// and NonFiniteError as above.
TrainResult train(const TrainConfig& config, const TrainOptions& options);

// Sets up the task for `config`, fixing vocab_size where the task decides it (text).
std::unique_ptr<Task> resolve_task(TrainConfig& config,
                                   const std::vector<int64_t>& vocabulary = {});

// Mean cross-entropy and accuracy over the scored positions of `set`, summarised by the task.
std::map<std::string, double> evaluate(Transformer& model, const Task& task,
                                       const std::vector<Batch>& set);

// Checks that `ckpt` was written for `config`; throws UsageError naming the first differing key.
void check_checkpoint_config(const TrainConfig& config, const std::string& ckpt_toml,
                             const std::string& source);

// A trained model restored from a checkpoint (a file or a run folder) for evaluation or sampling.
struct Restored {
  TrainConfig config;
  int64_t step = 0;
  std::vector<int64_t> vocabulary;  // text: id -> byte or codepoint
  Transformer model{nullptr};
};
Restored restore(const std::string& path);

}  // namespace recall
