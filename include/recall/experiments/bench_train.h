// Training-throughput benchmark (`recall bench train`): runs train() -- the very loop `recall
// train` runs -- on a config in a temporary folder and reports its own step timings, to compare
// against the PyTorch peer (scripts/peer_gpt.py). The first kWarmupSteps steps are warm-up
// and left out; evaluation and the checkpoint come after the last step, outside the timings.
// MFU counts (6 N + 12 L d T) FLOPs per token (nanoGPT's estimate, as the peer does) against the
// peak the trainer divides by (recall/core/machine.h: the larger of the measured and the
// theoretical fp32 rate; under precision = bf16, the bf16 GEMM's measured rate); useful_mfu counts
// the useful FLOPs (useful_flops_per_token) instead.
#pragma once
#include <cstdint>
#include <string>

#include "recall/train/train_config.h"

namespace recall {

struct BenchTrainResult {
  int64_t params = 0;
  double tokens_per_s = 0, step_ms = 0, peak_gflops = 0, mfu = 0, useful_mfu = 0;
  double flops_per_token = 0, useful_flops_per_token = 0;
  std::string peak_kind;  // "measured", "theoretical" or "config"
  std::string gemm;       // the GEMM backend (gemm_backend) under the run's precision
  Precision precision = Precision::kFp32;
  std::string device = "cpu";
  int nproc = 1;  // processes that trained (WORLD_SIZE): tokens_per_s counts all of their tokens
};

// Trains `config` for its `steps` (steps > 0 overrides them; the warm-up steps are part of them)
// with evaluation only at the end and no checkpoint before it, on `device` (MFU then counts
// against that device's fp32 GEMM rate). Throws std::invalid_argument when there would be no timed
// step.
BenchTrainResult bench_train(TrainConfig config, int64_t steps = 0,
                             const torch::Device& device = torch::kCPU);

// One JSON line:
// {"impl":"recall-cpp","device":"cpu","gemm":..,"precision":..,"params":..,"tokens_per_s":..,
// "step_ms":..,"peak_gflops":..,"peak":..,"flops_per_token_6n_12ldt":..,"mfu":..,
// "useful_flops_per_token":..,"useful_mfu":..} and "nproc" when more than one process trained.
std::string to_json(const BenchTrainResult& result);

// Reads the config (a file or a recipe name) with `sets` ("key=value") over it, runs the benchmark
// and prints the JSON line (rank 0 only, when several processes train). Returns the process exit
// code.
int run_bench_train(const std::string& config_path, int64_t steps,
                    const torch::Device& device = torch::kCPU,
                    const std::vector<std::string>& sets = {});

}  // namespace recall
