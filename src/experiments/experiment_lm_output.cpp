// `recall experiment` lm's files: lm.json, lm.png and the section (per feed-forward kind, the
// validation bits per character and the training throughput).
#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "experiment_lm.h"
#include "recall/formats/plot.h"

namespace recall::experiment_detail {

using nlohmann::json;

ExperimentResult write_lm(const Experiment& experiment, const LmFound& found) {
  const std::vector<FfnVariant>& variants = found.variants;
  const int64_t seeds = found.seeds, steps = found.steps;
  json runs = json::array();
  std::vector<std::vector<std::string>> rows;
  std::ostringstream data;  // one row per kind: index bpc_mean bpc_min bpc_max tokens_per_s
  for (size_t i = 0; i < variants.size(); ++i) {
    const auto& v = variants[i];
    std::vector<double> bpc, tps;
    int64_t params = 0;
    for (int64_t seed = 0; seed < seeds; ++seed) {
      const LmRun& r = found.runs[i][static_cast<size_t>(seed)];
      params = r.params;
      const double b = r.bits_per_char, t = r.tokens_per_s;
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
  experiment.write_json("lm.json", {{"config", "text-tiny"}, {"steps", steps}, {"runs", runs}});
  render_plot(
      experiment.path("lm.png"), data.str(),
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
      experiment.config().quick ? " --quick" : "", steps, seeds,
      markdown_table({"ffn", "parameters", "val bits / char", "tokens / s"}, rows));
  return out;
}

}  // namespace recall::experiment_detail
