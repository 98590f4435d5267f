#include "recall/experiments/bench_train.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/ops/gemm.h"
#include "recall/ops/peak_flops.h"
#include "recall/train/distributed.h"
#include "recall/train/estimates.h"
#include "recall/train/trainer.h"

namespace recall {

namespace {

// A fresh folder under the system temp folder, removed when done.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "recall-bench-train-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      throw std::runtime_error("bench train: cannot create a folder under " +
                               std::filesystem::temp_directory_path().string());
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::filesystem::path path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace

BenchTrainResult bench_train(TrainConfig config, int64_t steps, const torch::Device& device,
                             bool profile) {
  auto& tc = config.trainer;
  if (steps > 0) tc.steps = steps;
  check_arg(tc.steps > static_cast<int64_t>(kWarmupSteps),
            fmt::format("steps = {}: must be > {} (the first {} are warm-up)", tc.steps,
                        kWarmupSteps, kWarmupSteps));
  tc.warmup_steps = std::min(tc.warmup_steps, tc.steps);
  tc.eval_every = 0;        // evaluation only after the last step
  tc.eval_batches = 1;      // and short: it is not timed
  tc.checkpoint_every = 0;  // the one checkpoint is written after the last step
  tc.log_every = tc.steps;
  config.validate();
  ScratchDir dir;
  TrainOptions options;
  options.out_dir = (dir.path() / "run").string();
  options.progress = false;
  options.device = device;
  options.profile = profile;
  const TrainResult run = train(config, options);

  BenchTrainResult r;
  const int64_t params = Transformer(config.model)->num_parameters();
  std::vector<double> timed, recorded(kWarmupSteps, 0.0);  // recorded: behind a warm-up, as timed
  for (size_t i = 0; i < run.step_seconds.size(); ++i)
    (i < run.profiled.size() && run.profiled[i] ? recorded : timed).push_back(run.step_seconds[i]);
  const double dt = mean_step_seconds(timed);
  r.timed_steps = static_cast<int64_t>(timed.size()) - static_cast<int64_t>(kWarmupSteps);
  r.profiled_steps = static_cast<int64_t>(recorded.size() - kWarmupSteps);
  if (r.profiled_steps > 0) {
    r.profile = run.profile;
    r.profile *= 1.0 / static_cast<double>(r.profiled_steps);
    r.profiled_step_ms = mean_step_seconds(recorded) * 1e3;
    for (const auto& [name, seconds] : recorded_op_seconds()) {
      if (r.top_ops.size() == 12) break;
      r.top_ops.emplace_back(name, seconds / static_cast<double>(r.profiled_steps));
    }
  }
  r.params = params;
  r.device = device.str();
  r.tokens_per_s = static_cast<double>(tokens_per_step(config)) / dt;
  r.step_ms = dt * 1e3;
  r.peak_gflops = run.peak_flops / 1e9;
  r.peak_kind = run.peak_kind;
  r.precision = tc.precision;
  const ScopedPrecision precision(tc.precision);  // the GEMM that ran, as the run had it
  r.gemm = gemm_backend(device);
  r.flops_per_token = flops_per_token(config, params);
  r.useful_flops_per_token = useful_flops_per_token(config, params);
  r.mfu = r.tokens_per_s * r.flops_per_token / run.peak_flops;
  r.useful_mfu = r.tokens_per_s * r.useful_flops_per_token / run.peak_flops;
  r.nproc = dist_env_from_environment().world_size;
  r.gemm_gflops = peak_flops(device).measured * r.nproc / 1e9;
  r.useful_gemm = r.tokens_per_s * r.useful_flops_per_token / (r.gemm_gflops * 1e9);
  r.precision_note = bf16_slower_note(device);
  return r;
}

std::string to_json(const BenchTrainResult& r) {
  nlohmann::ordered_json j;
  j["impl"] = "recall-cpp";
  j["device"] = r.device;
  j["gemm"] = r.gemm;
  j["precision"] = to_string(r.precision);
  j["params"] = r.params;
  j["tokens_per_s"] = std::llround(r.tokens_per_s);
  j["step_ms"] = std::round(r.step_ms * 10) / 10;
  j["peak_gflops"] = std::round(r.peak_gflops * 10) / 10;
  j["peak"] = r.peak_kind;
  j["flops_per_token_6n_12ldt"] = std::llround(r.flops_per_token);
  j["mfu"] = std::round(r.mfu * 1000) / 1000;
  j["useful_flops_per_token"] = std::llround(r.useful_flops_per_token);
  j["useful_mfu"] = std::round(r.useful_mfu * 1000) / 1000;
  j["gemm_gflops"] = std::round(r.gemm_gflops * 10) / 10;
  j["useful_gemm"] = std::round(r.useful_gemm * 1000) / 1000;
  if (r.nproc > 1) j["nproc"] = r.nproc;
  if (!r.precision_note.empty()) j["precision_note"] = r.precision_note;
  if (r.profiled_steps > 0) {
    nlohmann::ordered_json parts;
    auto ms = [](double seconds) { return std::round(seconds * 1e4) / 10; };  // 0.1 ms
    for (size_t i = 0; i < kStepParts; ++i)
      parts[to_string(static_cast<StepPart>(i))] = ms(r.profile.seconds[i]);
    parts["sum"] = ms(r.profile.total());
    j["profile_ms"] = parts;
    j["profiled_step_ms"] = std::round(r.profiled_step_ms * 10) / 10;
    j["profiled_steps"] = r.profiled_steps;
    nlohmann::ordered_json top;  // which ops make up the parts, in thread-ms per recorded step
    for (const auto& [name, seconds] : r.top_ops) top[name] = ms(seconds);
    j["top_ops_thread_ms"] = top;
  }
  return j.dump();
}

int run_bench_train(const std::string& config_path, int64_t steps, const torch::Device& device,
                    const std::vector<std::string>& sets) {
  const auto r = bench_train(train_config_from_file(config_path, sets), steps, device,
                             /*profile=*/true);
  if (dist_env_from_environment().rank == 0) {
    if (!r.precision_note.empty()) fmt::print(stderr, "# {}\n", r.precision_note);
    fmt::print("{}\n", to_json(r));
  }
  return 0;
}

}  // namespace recall
