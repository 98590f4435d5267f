// `recall experiment` sharpness: attn_scale swept on mqar (recall/experiments/experiments.h).
#include "experiment_sharpness.h"

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
#include "recall/train/trainer.h"

namespace recall::experiment_detail {

namespace {

SharpnessRun run_scale(const Experiment& x, double scale, int64_t seed, int64_t steps) {
  const std::vector<std::string> sets = {fmt::format("steps={}", steps),
                                         "eval_every=100",
                                         "eval_batches=4",
                                         fmt::format("checkpoint_every={}", steps),
                                         fmt::format("attn_scale={}", scale),
                                         fmt::format("seed={}", seed)};
  const TrainConfig tc = train_config_from_file("mqar-tiny", sets);
  // the model the run starts from (the trainer seeds torch with the run's seed, then builds)
  torch::manual_seed(static_cast<uint64_t>(seed));
  Transformer init(tc.model);
  auto task = make_task(tc);
  Rng rng(0x5eed0000ULL + static_cast<uint64_t>(seed));
  const Batch batch = task->sample(tc.trainer.batch_size, tc.model.seq_len, rng);
  SharpnessRun r;
  r.init = attention_stats(init, batch);
  const std::string name = fmt::format("sharpness-{}/scale{}-seed{}", steps, scale, seed);
  const TrainResult tr = x.train_run("mqar-tiny", sets, name);
  Restored restored = restore(x.run_dir(name));
  r.trained = attention_stats(restored.model, batch);
  r.steps_to_99 = steps_to_accuracy(x.run_dir(name), 0.99);
  r.accuracy = tr.eval.at("accuracy");
  return r;
}

}  // namespace

SharpnessFound Experiment::sharpness() {
  SharpnessFound found;
  found.scales = sizes().sharpness_scales;
  found.seeds = sizes().sharpness_seeds;
  found.steps = this->steps(sizes().sharpness_steps);
  for (double scale : found.scales) {
    std::vector<SharpnessRun>& runs = found.runs.emplace_back();
    for (int64_t seed = 0; seed < found.seeds; ++seed)
      runs.push_back(run_scale(*this, scale, seed, found.steps));
  }
  return found;
}

}  // namespace recall::experiment_detail
