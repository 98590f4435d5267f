// `recall experiment` lm: learned key-values on language (recall/experiments/experiments.h).
#include "experiment_lm.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "recall/analysis/extrapolate.h"
#include "recall/analysis/inspect.h"
#include "recall/analysis/probe.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/experiments/experiments.h"
#include "recall/experiments/report.h"
#include "recall/stores/theory.h"
#include "recall/train/metrics.h"
#include "recall/train/trainer.h"

namespace recall::experiment_detail {

// The training throughput a run logged last; 0 when it logged none.
double logged_tokens_per_s(const std::string& run_dir) {
  double last = 0;
  for (const auto& r : read_metrics(run_dir)) last = r.get("tokens_per_s").value_or(last);
  return last;
}

LmFound Experiment::lm() {
  // d = 64, 2 layers: each block's store has 12 d^2 parameters (mlp width 6 d, swiglu 4 d,
  // learned_kv 5 d slots, attention memory slots 6 d key-value pairs)
  LmFound found;
  found.variants = {{"mlp", {"ffn=mlp", "activation=gelu", "ffn_mult=6"}},
                    {"swiglu", {"ffn=swiglu", "ffn_mult=4"}},
                    {"learned_kv", {"ffn=learned_kv", "ffn_slots=320"}},
                    {"attn_mem_kv", {"ffn=none", "attn_mem_kv=384"}}};
  found.seeds = sizes().lm_seeds;
  found.steps = this->steps(sizes().lm_steps);
  const int64_t seeds = found.seeds, steps = found.steps;
  for (const auto& v : found.variants) {
    std::vector<LmRun>& runs = found.runs.emplace_back();
    for (int64_t seed = 0; seed < seeds; ++seed) {
      std::vector<std::string> sets = {"d_model=64",
                                       "n_layers=2",
                                       "n_heads=2",
                                       "seq_len=64",
                                       "batch_size=32",
                                       fmt::format("steps={}", steps),
                                       "warmup_steps=50",
                                       fmt::format("eval_every={}", steps),
                                       fmt::format("checkpoint_every={}", steps),
                                       "log_every=50",
                                       "eval_batches=16",
                                       fmt::format("seed={}", seed)};
      sets.insert(sets.end(), v.sets.begin(), v.sets.end());
      const std::string name = fmt::format("lm-{}/{}-seed{}", steps, v.name, seed);
      const auto tr = train_run("text-tiny", sets, name);
      LmRun& r = runs.emplace_back();
      r.params = restore(run_dir(name)).model->num_parameters();
      r.bits_per_char = tr.eval.at("bits_per_char");
      r.tokens_per_s = logged_tokens_per_s(run_dir(name));
    }
  }
  return found;
}

}  // namespace recall::experiment_detail
