#include "recall/train/bench_train.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/models/model_config.h"
#include "recall/train/adamw.h"
#include "recall/train/data_parallel.h"
#include "recall/train/presets.h"

namespace recall {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

BenchTrainOptions bench_train_options_from_file(const std::string& path) {
  toml::table table;
  try {
    const auto preset = preset_for_config(path);
    std::error_code ec;
    if (!preset && !std::filesystem::is_regular_file(path, ec))
      throw UsageError(
          fmt::format("--config {}: no such file; give a TOML file or the preset bench-gpt", path));
    table = preset ? toml::parse(*preset, "preset " + path) : toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw std::invalid_argument(fmt::format("{}:{}:{}: {}", path, e.source().begin.line,
                                            e.source().begin.column, e.description()));
  }
  BenchTrainOptions o;
  std::vector<std::string> used;
  o.model = model_config_from_toml(table, &used);
  if (const toml::node* n = table.get("batch_size")) {
    auto v = n->value_exact<int64_t>();
    check_arg(v && *v >= 1, "batch_size: must be an integer >= 1");
    o.batch_size = *v;
  }
  if (const toml::node* n = table.get("lr")) {
    auto v = n->value<double>();
    check_arg(v && std::isfinite(*v) && *v > 0, "lr: must be a number > 0");
    o.lr = *v;
  }
  if (const toml::node* n = table.get("steps")) {
    auto v = n->value_exact<int64_t>();
    check_arg(v && *v >= 1 && *v <= 1000000, "steps: must be an integer in [1, 1000000]");
    o.steps = static_cast<int>(*v);
  }
  used.insert(used.end(), {"batch_size", "lr", "steps"});
  for (const auto& [key, node] : table)
    check_arg(std::find(used.begin(), used.end(), key.str()) != used.end(),
              fmt::format("{}: unknown key '{}'; accepted: the model keys ({}) and batch_size, "
                          "lr, steps",
                          path, key.str(), fmt::join(model_config_keys(), ", ")));
  return o;
}

BenchTrainResult bench_train(const BenchTrainOptions& o) {
  check_arg(o.steps >= 1, fmt::format("steps = {}: must be >= 1", o.steps));
  torch::manual_seed(0);
  const ModelConfig& c = o.model;
  Transformer model(c);
  FusedAdamW optimizer(model->parameters(), FusedAdamWOptions(o.lr));
  auto data = torch::randint(0, c.vocab_size, {o.batch_size, c.seq_len + 1});
  auto inputs = data.narrow(1, 0, c.seq_len), targets = data.narrow(1, 1, c.seq_len);
  const int threads = at::get_num_threads();
  auto step = [&] {
    optimizer.zero_grad();
    data_parallel_backward(model, inputs, targets, threads);
    optimizer.step();
  };

  BenchTrainResult r;
  r.params = model->num_parameters();
  const double peak = measure_gemm_gflops() * 1e9;  // same process, same threads
  for (int i = 0; i < 2; ++i) step();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i) step();
  const double dt = seconds_since(t0) / o.steps;
  r.tokens_per_s = static_cast<double>(o.batch_size * c.seq_len) / dt;
  r.step_ms = dt * 1e3;
  r.gemm_gflops = peak / 1e9;
  const double flops_per_token = 6.0 * static_cast<double>(r.params) +
                                 12.0 * static_cast<double>(c.n_layers * c.d_model * c.seq_len);
  r.mfu = r.tokens_per_s * flops_per_token / peak;
  return r;
}

std::string to_json(const BenchTrainResult& r) {
  nlohmann::ordered_json j;
  j["impl"] = "recall-cpp";
  j["params"] = r.params;
  j["tokens_per_s"] = std::llround(r.tokens_per_s);
  j["step_ms"] = std::round(r.step_ms * 10) / 10;
  j["gemm_gflops"] = std::round(r.gemm_gflops * 10) / 10;
  j["mfu"] = std::round(r.mfu * 1000) / 1000;
  return j.dump();
}

int run_bench_train(const std::string& config_path, int steps) {
  BenchTrainOptions o = bench_train_options_from_file(config_path);
  if (steps > 0) o.steps = steps;
  fmt::print("{}\n", to_json(bench_train(o)));
  return 0;
}

}  // namespace recall
