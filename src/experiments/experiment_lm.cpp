// `recall experiment` lm: learned key-values on language (recall/experiments/experiments.h).
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

#include "experiment.h"
#include "recall/analysis/extrapolate.h"
#include "recall/analysis/inspect.h"
#include "recall/analysis/probe.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/experiments/experiments.h"
#include "recall/experiments/report.h"
#include "recall/formats/plot.h"
#include "recall/stores/theory.h"
#include "recall/train/metrics.h"
#include "recall/train/trainer.h"

namespace recall::experiment_detail {

using nlohmann::json;

// The training throughput a run logged last; 0 when it logged none.
double logged_tokens_per_s(const std::string& run_dir) {
  double last = 0;
  for (const auto& r : read_metrics(run_dir)) last = r.get("tokens_per_s").value_or(last);
  return last;
}

ExperimentResult Experiment::lm() {
  // d = 64, 2 layers: each block's store has 12 d^2 parameters (mlp width 6 d, swiglu 4 d,
  // learned_kv 5 d slots, attention memory slots 6 d key-value pairs)
  const std::vector<FfnVariant> variants = {{"mlp", {"ffn=mlp", "activation=gelu", "ffn_mult=6"}},
                                            {"swiglu", {"ffn=swiglu", "ffn_mult=4"}},
                                            {"learned_kv", {"ffn=learned_kv", "ffn_slots=320"}},
                                            {"attn_mem_kv", {"ffn=none", "attn_mem_kv=384"}}};
  const int64_t seeds = sizes().lm_seeds, steps = this->steps(sizes().lm_steps);
  json runs = json::array();
  std::vector<std::vector<std::string>> rows;
  std::ostringstream data;  // one row per kind: index bpc_mean bpc_min bpc_max tokens_per_s
  for (size_t i = 0; i < variants.size(); ++i) {
    const auto& v = variants[i];
    std::vector<double> bpc, tps;
    int64_t params = 0;
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
      params = restore(run_dir(name)).model->num_parameters();
      const double b = tr.eval.at("bits_per_char"), t = logged_tokens_per_s(run_dir(name));
      runs.push_back({{"ffn", v.name},
                      {"params", params},
                      {"seed", seed},
                      {"steps", steps},
                      {"val_bits_per_char", b},
                      {"tokens_per_s", t}});
      bpc.push_back(b);
      tps.push_back(t);
    }
    rows.push_back({"`" + v.name + "`", std::to_string(params), mean_range(bpc),
                    fmt::format("{:.0f}", mean(tps))});
    data << i << ' ' << mean(bpc) << ' ' << *std::min_element(bpc.begin(), bpc.end()) << ' '
         << *std::max_element(bpc.begin(), bpc.end()) << ' ' << mean(tps) << " \"" << v.name
         << "\"\n";
  }
  write_json("lm.json", {{"config", "text-tiny"}, {"steps", steps}, {"runs", runs}});
  render_plot(
      path("lm.png"), data.str(),
      [&](const std::string& f) {
        return fmt::format(
            "set multiplot layout 1,2\nset grid\nset style fill solid 0.5\nset boxwidth 0.6\n"
            "set xrange [-0.6:{3}]\nset key off\n"
            "set title 'validation bits per character (bars: min to max over seeds)'\n"
            "set yrange [0:*]\nplot '{0}' using 1:2:xtic(6) with boxes lc {1}, '{0}' using "
            "1:2:3:4 with yerrorbars pt 0 lc rgb 'black'\n"
            "set title 'training tokens / s'\nplot '{0}' using 1:5:xtic(6) with boxes lc {2}\n"
            "unset multiplot\n",
            f, plot_colour(0), plot_colour(1), variants.size() - 0.4);
      },
      1400, 520);
  ExperimentResult out;
  out.title = "Learned key-values instead of the feed-forward layer, on language";
  out.json = "lm.json";
  out.plot = "lm.png";
  out.markdown = fmt::format(
      "`recall experiment lm{}`: text-tiny's corpus, byte level, a 2-layer d = 64 model "
      "(sequences of 64, batch 32, {} steps, {} seed(s)), each block's store at 12 d^2 "
      "parameters: an MLP (gelu, width 6 d), SwiGLU (width 4 d), learned_kv (320 slots), or no "
      "feed-forward layer and 384 learned key-value pairs in attention (`attn_mem_kv`). "
      "Validation bits per character (mean [min, max] over seeds) and training tokens per "
      "second on this machine.\n\n{}\n![lm](lm.png)\n",
      config_.quick ? " --quick" : "", steps, seeds,
      markdown_table({"ffn", "parameters", "val bits / char", "tokens / s"}, rows));
  return out;
}

}  // namespace recall::experiment_detail
