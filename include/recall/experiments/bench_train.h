// Training-throughput benchmark (`recall bench train`): runs train() -- the very loop `recall
// train` runs -- on a config in a temporary folder and reports its own step timings, to compare
// against the PyTorch peer (scripts/peer_gpt.py). The first kWarmupSteps steps are warm-up
// and left out; evaluation and the checkpoint come after the last step, outside the timings.
// MFU counts (6 N + 12 L d T) FLOPs per token (nanoGPT's estimate, as the peer does) against the
// peak the trainer divides by (recall/core/machine.h: the larger of the measured and the
// theoretical fp32 rate; under precision = bf16, the bf16 GEMM's measured rate); useful_mfu counts
// the useful FLOPs (useful_flops_per_token) instead. useful_gemm divides the useful FLOPs by the
// GEMM rate the run's precision measured at the trainer's shapes (gemm_gflops) alone: how near the
// step comes to spending all its time in matrix products, where the theoretical rate may be out of
// any GEMM's reach (an AMD Zen 4 runs 512-bit FMAs as two 256-bit halves).
//
// With `profile`, every other timed step is recorded (TrainOptions::profile): the unrecorded steps
// give the throughput, the recorded ones the step's parts (recall/core/step_profile.h) in ms per
// step, and the pair what recording cost.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "recall/core/step_profile.h"
#include "recall/train/train_config.h"

namespace recall {

struct BenchTrainResult {
  int64_t params = 0;
  double tokens_per_s = 0, step_ms = 0, peak_gflops = 0, mfu = 0, useful_mfu = 0;
  double gemm_gflops = 0, useful_gemm = 0;  // measured GEMM rate (all processes); useful / it
  double flops_per_token = 0, useful_flops_per_token = 0;
  std::string peak_kind;  // "measured", "theoretical" or "config"
  std::string gemm;       // the GEMM backend (gemm_backend) under the run's precision
  Precision precision = Precision::kFp32;
  std::string device = "cpu";
  int nproc = 1;  // processes that trained (WORLD_SIZE): tokens_per_s counts all of their tokens
  // With profile: the recorded steps' mean parts (seconds per step) and their mean wall time.
  StepProfile profile;
  double profiled_step_ms = 0;
  int64_t profiled_steps = 0, timed_steps = 0;  // recorded steps; unrecorded steps timed
  // The 12 recorded ops of most exclusive seconds per recorded step, summed over the threads.
  std::vector<std::pair<std::string, double>> top_ops;
  std::string precision_note;  // bf16_slower_note (recall/ops/peak_flops.h): "" where bf16 pays
};

// Trains `config` for its `steps` (steps > 0 overrides them; the warm-up steps are part of them)
// with evaluation only at the end and no checkpoint before it, on `device` (MFU then counts
// against that device's fp32 GEMM rate). Throws std::invalid_argument when there would be no timed
// step.
BenchTrainResult bench_train(TrainConfig config, int64_t steps = 0,
                             const torch::Device& device = torch::kCPU, bool profile = false);

// One JSON line:
// {"impl":"recall-cpp","device":"cpu","gemm":..,"precision":..,"params":..,"tokens_per_s":..,
// "step_ms":..,"peak_gflops":..,"peak":..,"flops_per_token_6n_12ldt":..,"mfu":..,
// "useful_flops_per_token":..,"useful_mfu":..,"gemm_gflops":..,"useful_gemm":..}, "nproc" when more
// than one process trained, and with a profile "profile_ms" (each part's ms per step, in StepPart
// order, and their "sum"), "profiled_step_ms" (the recorded steps' mean wall time, which the sum
// matches), "profiled_steps" and "top_ops_thread_ms" (top_ops).
std::string to_json(const BenchTrainResult& result);

// Reads the config (a file or a recipe name) with `sets` ("key=value") over it, runs the benchmark
// with its profile and prints the JSON line (rank 0 only, when several processes train). Returns
// the process exit code.
int run_bench_train(const std::string& config_path, int64_t steps,
                    const torch::Device& device = torch::kCPU,
                    const std::vector<std::string>& sets = {});

}  // namespace recall
