// recall bench eval: the throughput of scoring long prompts, the path of `recall eval`,
// `extrapolate` and the long-context experiment (evaluate() through the causal kernel), with a
// profile of a recorded pass (recall/core/step_profile.h) in seconds by part.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "recall/analysis/inspect.h"
#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/core/step_profile.h"
#include "recall/ops/gemm.h"
#include "recall/ops/kernels.h"
#include "recall/train/task.h"
#include "recall/train/train_config.h"
#include "recall/train/trainer.h"

namespace recall::cli {

namespace {

// Attention's useful FLOPs for one prompt of T tokens: q k^T and the weights times v, causal, so
// each query t reads t + 1 keys: 2 products x 2 d_model (t + 1) summed over t, per layer.
double attention_flops(const ModelConfig& m, int64_t T) {
  const double d = static_cast<double>(m.d_model), t = static_cast<double>(T);
  return static_cast<double>(m.n_layers) * 4.0 * d * t * (t + 1) / 2;
}

}  // namespace

void add_bench_eval(CLI::App& bench, Action& action) {
  struct Opts {
    std::string config = "mqar-extrapolate", checkpoint, pairs = "grow";
    int64_t multiple = 64, batches = 1;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = bench.add_subcommand(
      "eval", "scoring long mqar prompts as recall eval does, fast kernel beside the reference");
  cmd->add_option("--config", o->config, "a recipe of train/ or a TOML file")
      ->capture_default_str();
  cmd->add_option("--checkpoint", o->checkpoint, "score this run instead of a fresh model");
  cmd->add_option("--multiple", o->multiple, "the prompt length in training lengths")
      ->check(CLI::Range(int64_t{1}, int64_t{64}))
      ->capture_default_str();
  cmd->add_option("--batches", o->batches, "prompts, in training batches")
      ->check(CLI::Range(int64_t{1}, int64_t{100}))
      ->capture_default_str();
  cmd->add_option("--pairs", o->pairs, "mqar pairs at the length: fixed or grow")
      ->capture_default_str();
  cmd->callback([o, &action] {
    const PairsAtLength pairs = pairs_at_length_from_string(o->pairs);
    action = [o, pairs] {
      Restored r;
      if (o->checkpoint.empty()) {
        r.config = train_config_from_file(o->config);
        r.model = Transformer(r.config.model);  // the weights do not change the time
      } else {
        r = restore(o->checkpoint);
      }
      check_arg(r.config.task.kind == TaskKind::kMqar,
                fmt::format("--config {}: bench eval scores mqar prompts; its task is {}",
                            o->config, to_string(r.config.task.kind)));
      r.model->eval();
      auto task = make_task(r.config);
      const int64_t T = o->multiple * r.config.model.seq_len;
      const int64_t n_pairs = mqar_pairs_at(r.config, o->multiple, pairs);
      const auto set = length_prompts(*task, r.config, T, o->batches, n_pairs);
      int64_t prompts = 0;
      for (const Batch& b : set) prompts += b.x.size(0);
      const double gemm = measure_gemm_gflops(10, 3, torch::kCPU);
      auto time_it = [&] {
        evaluate(r.model, *task, {set.front()});  // warm-up: the first allocations
        const auto t0 = std::chrono::steady_clock::now();
        const double accuracy = evaluate(r.model, *task, set).at("accuracy");
        return std::pair{
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), accuracy};
      };
      const auto [fast, accuracy] = time_it();
      double reference = 0;
      {
        ScopedKernels plain(Kernels::kReference);
        reference = time_it().first;
      }
      // A third pass, its ops recorded: where the fast pass's time goes (recording costs a little).
      const StepProfile parts = record_parts([&] { evaluate(r.model, *task, set); });
      nlohmann::ordered_json profile;
      for (StepPart p :
           {StepPart::kGemm, StepPart::kAttention, StepPart::kNorms, StepPart::kActivations,
            StepPart::kLoss, StepPart::kElementwise, StepPart::kUnrecorded})
        profile[to_string(p)] = parts[p];
      profile["sum"] = parts.total();
      const double flops = attention_flops(r.config.model, T) * static_cast<double>(prompts);
      nlohmann::json j = {{"bench", "eval"},
                          {"config", o->checkpoint.empty() ? o->config : o->checkpoint},
                          {"threads", torch::get_num_threads()},
                          {"seq_len", T},
                          {"pairs", n_pairs},
                          {"prompts", prompts},
                          {"seconds", fast},
                          {"tokens_per_s", static_cast<double>(prompts * T) / fast},
                          {"attention_gflops", flops / fast / 1e9},
                          {"reference_seconds", reference},
                          {"gemm", gemm_backend()},
                          {"gemm_gflops", gemm},
                          {"accuracy", accuracy},
                          {"peak_rss_mib", peak_rss_mib()}};
      j["profile_s"] = profile;
      std::printf("%s\n", j.dump().c_str());
      return 0;
    };
  });
}

}  // namespace recall::cli
