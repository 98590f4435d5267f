// Training-throughput benchmark (`recall bench train`): full steps (forward, backward, AdamW) of a
// transformer on random tokens, compared against the PyTorch peer (shared/bench/peer_gpt.py).
// MFU counts (6 N + 12 L d T) FLOPs per token (nanoGPT's estimate) against the FLOP rate of a
// 1024^3 fp32 GEMM timed in the same process, exactly as the peer does.
#pragma once
#include <cstdint>
#include <string>

#include "recall/models/model.h"

namespace recall {

struct BenchTrainOptions {
  ModelConfig model;
  int64_t batch_size = 16;
  double lr = 1e-3;
  int steps = 10;  // timed steps, after 2 warm-up steps
};

struct BenchTrainResult {
  int64_t params = 0;
  double tokens_per_s = 0, step_ms = 0, gemm_gflops = 0, mfu = 0;
};

// Reads a flat TOML file: the ModelConfig keys plus batch_size, lr, steps. Throws
// std::invalid_argument on a missing file, a syntax error, an unknown key or a bad value.
BenchTrainOptions bench_train_options_from_file(const std::string& path);

BenchTrainResult bench_train(const BenchTrainOptions& options);

// One JSON line: {"impl":"recall-cpp","params":..,"tokens_per_s":..,"step_ms":..,
// "gemm_gflops":..,"mfu":..}
std::string to_json(const BenchTrainResult& result);

// Reads the config, runs the benchmark (steps > 0 overrides the file's) and prints the JSON line.
// Returns the process exit code.
int run_bench_train(const std::string& config_path, int steps);

}  // namespace recall
