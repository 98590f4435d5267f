// `recall experiment` facts: bits per parameter to saturation (recall/experiments/experiments.h).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <sstream>

#include "experiment.h"
#include "recall/analysis/extrapolate.h"
#include "recall/analysis/inspect.h"
#include "recall/analysis/probe.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/core/plot.h"
#include "recall/experiments/experiments.h"
#include "recall/experiments/report.h"
#include "recall/stores/theory.h"
#include "recall/train/trainer.h"

namespace recall::experiment_detail {

using nlohmann::json;

const std::vector<FfnVariant>& facts_variants() {
  static const std::vector<FfnVariant> variants = {
      {"mlp-relu", {"ffn=mlp", "activation=relu", "ffn_mult=6"}},
      {"mlp-relu2", {"ffn=mlp", "activation=relu2", "ffn_mult=6"}},
      {"mlp-gelu", {"ffn=mlp", "activation=gelu", "ffn_mult=6"}},
      {"glu-silu", {"ffn=glu", "activation=silu", "ffn_mult=4"}},
      {"glu-relu2", {"ffn=glu", "activation=relu2", "ffn_mult=4"}},
      {"linear", {"ffn=linear", "ffn_mult=6"}},
      {"learned_kv", {"ffn=learned_kv", "ffn_slots=160"}}};
  return variants;
}

ExperimentResult Experiment::facts() {
  // 128 x 128 (subject, relation) cells with 256 objects: 8 bits a fact, 131072 bits at most, in
  // a one-layer d = 32 model of about 33k parameters, so that the table is not what limits bits
  // per parameter. Every feed-forward store has 12 d^2 parameters.
  const int64_t subjects = 128, relations = 128, objects = 256;
  const std::vector<FfnVariant>& variants = facts_variants();
  const std::vector<int64_t> grid =
      c_.quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{2048, 4096, 8192, 16384};
  // Every point sees each fact equally often (exposures = steps x batch / facts): with a fixed
  // number of steps a larger table would only be less trained, and bits stored would fall past the
  // best point for that reason alone. --steps N fixes the steps instead. The kinds are ranked at
  // these exposures; the best is then trained longer (below), which is where the plateau shows.
  const int64_t batch = 512, exposures = facts_exposures(c_.quick);
  auto steps_for = [&](int64_t n) {
    return c_.steps > 0 ? c_.steps : std::max<int64_t>(100, n * exposures / batch);
  };
  auto sets_for = [&](const FfnVariant& v, int64_t n, int64_t s) {
    std::vector<std::string> sets = {fmt::format("facts_n={}", n),
                                     fmt::format("facts_subjects={}", subjects),
                                     fmt::format("facts_relations={}", relations),
                                     fmt::format("facts_objects={}", objects),
                                     fmt::format("steps={}", s),
                                     fmt::format("batch_size={}", batch),
                                     "lr=3e-3",
                                     "min_lr=3e-5",
                                     fmt::format("eval_every={}", s),
                                     fmt::format("checkpoint_every={}", s),
                                     "log_every=500"};
    sets.insert(sets.end(), v.sets.begin(), v.sets.end());
    return sets;
  };
  json points = json::array();
  std::ostringstream data;  // one block per kind: facts bits_stored bits_per_param
  struct Best {
    std::string kind;
    size_t variant = 0;  // its index in variants
    int64_t params = 0, facts = 0, steps = 0;
    double bits_per_param = -1e9, accuracy = 0;
    int64_t largest = 0, largest_steps = 0;  // the largest table trained, where training longer
    double largest_bits_per_param = 0;       // shows whether exposures still limit bits stored
    std::string stored;                      // bits stored at each number of facts
  };
  std::vector<Best> best;
  for (size_t i = 0; i < variants.size(); ++i) {
    const FfnVariant& v = variants[i];
    Best b;
    b.kind = v.name;
    b.variant = i;
    double last_bits = 0;
    for (int64_t n : grid) {
      const int64_t steps = steps_for(n);
      const auto tr = train_run("facts-tiny", sets_for(v, n, steps),
                                fmt::format("facts/{}-{}-{}steps", v.name, n, steps));
      const auto& e = tr.eval;
      const auto params = static_cast<int64_t>(e.at("params"));
      const auto [ffn, activation] = feed_forward_from_name(v.name);
      points.push_back(
          {{"ffn", to_string(ffn)},
           {"activation", ffn == FfnKind::kMlp || ffn == FfnKind::kGlu ? json(to_string(activation))
                                                                       : json(nullptr)},
           {"kind", v.name},
           {"params", params},
           {"facts", n},
           {"steps", steps},
           {"exposures_per_fact", static_cast<double>(steps * batch) / n},
           {"accuracy", e.at("accuracy")},
           {"bits_stored", e.at("bits")},
           {"bits_per_param", e.at("bits_per_param")}});
      data << n << ' ' << e.at("bits") << ' ' << e.at("bits_per_param") << '\n';
      b.params = params;
      b.stored +=
          fmt::format("{}{}: {:.1f}k", b.stored.empty() ? "" : ", ", n, e.at("bits") / 1000);
      if (e.at("bits_per_param") > b.bits_per_param) {
        b.bits_per_param = e.at("bits_per_param");
        b.facts = n;
        b.steps = steps;
        b.accuracy = e.at("accuracy");
      }
      b.largest = n;
      b.largest_steps = steps;
      b.largest_bits_per_param = e.at("bits_per_param");
      // past capacity: twice the facts added under 5 % to bits stored, so larger tables would
      // only repeat the plateau
      if (last_bits > 0 && e.at("bits") < 1.05 * last_bits) break;
      last_bits = e.at("bits");
    }
    data << "\n\n";
    best.push_back(b);
  }
  // More training, at the largest table each kind was trained on (where the table is not what
  // limits bits stored): the best kind (--more-kinds: others, or all), by default at twice and
  // four times the exposures (quick: twice), --more-exposures for a longer chain. The last link of
  // a chain, as a gain per doubling, under 3 % is the kind's plateau; above it the sweep's figure
  // is short of the plateau, and the text says so.
  auto ranked = best;
  std::stable_sort(ranked.begin(), ranked.end(), [](const Best& a, const Best& b) {
    return a.bits_per_param > b.bits_per_param;
  });
  const auto& mk = c_.more_kinds;
  auto trained_longer = [&](const std::string& kind) {
    if (mk.empty()) return kind == ranked.front().kind;
    return mk.front() == "all" || std::find(mk.begin(), mk.end(), kind) != mk.end();
  };
  std::vector<const Best*> longer;
  for (const auto& b : ranked)
    if (trained_longer(b.kind)) longer.push_back(&b);
  // Every chain's steps, checked before any of them trains: with --steps fixed, an exposure can
  // mean fewer steps than the sweep's own run.
  std::vector<std::vector<int64_t>> chain_steps;
  for (const Best* k : longer) {
    std::vector<int64_t> steps;
    for (const int64_t e : c_.more_exposures) steps.push_back(k->largest * e / batch);
    if (steps.empty())
      for (int times : c_.quick ? std::vector<int>{2} : std::vector<int>{2, 4})
        steps.push_back(times * k->largest_steps);
    check_arg(steps.front() > k->largest_steps,
              fmt::format("--more-exposures: {} steps at {} facts are not more than the {} "
                          "already trained; give larger exposures",
                          steps.front(), k->largest, k->largest_steps));
    chain_steps.push_back(steps);
  }
  struct More {
    int64_t steps = 0;
    double bits_per_param = 0;
  };
  json more_json = json::array();
  std::vector<std::vector<std::string>> more_rows;
  std::vector<std::string> plateau_of, short_of;  // the text's verdicts
  for (size_t j = 0; j < longer.size(); ++j) {
    const Best* k = longer[j];
    const int64_t largest = k->largest;
    std::vector<More> more = {{k->largest_steps, k->largest_bits_per_param}};
    for (const int64_t s : chain_steps[j]) {
      const auto tr = train_run("facts-tiny", sets_for(variants[k->variant], largest, s),
                                fmt::format("facts/{}-{}-{}steps", k->kind, largest, s));
      more.push_back({s, tr.eval.at("bits_per_param")});
    }
    const More& last = more.back();
    const More& before = more[more.size() - 2];
    const std::optional<double> gain =
        gain_per_doubling(before.steps, before.bits_per_param, last.steps, last.bits_per_param);
    const bool at_plateau = plateau_reached(gain);
    json chain = json::array();
    std::string cells;
    for (const auto& m : more) {
      const double e = static_cast<double>(m.steps * batch) / largest;
      chain.push_back(
          {{"steps", m.steps}, {"exposures_per_fact", e}, {"bits_per_param", m.bits_per_param}});
      cells += fmt::format("{}{:.0f}: {:.3f}", cells.empty() ? "" : ", ", e, m.bits_per_param);
      data << e << ' ' << m.bits_per_param << '\n';  // after the kinds' blocks: exposures bpp
    }
    data << "\n\n";
    more_json.push_back({{"kind", k->kind},
                         {"facts", largest},
                         {"points", chain},
                         {"last_gain_per_doubling", gain ? json(*gain) : json(nullptr)},
                         {"plateau", at_plateau}});
    more_rows.push_back({"`" + k->kind + "`", std::to_string(largest), cells,
                         gain ? fmt::format("{:+.1f} %", 100 * *gain) : "—",
                         at_plateau ? "yes" : "not yet"});
    (at_plateau ? plateau_of : short_of)
        .push_back(fmt::format("`{}` {}{:.3f}", k->kind, at_plateau ? "" : "at least ",
                               last.bits_per_param));
  }
  std::vector<std::string> verdict;
  if (!plateau_of.empty())
    verdict.push_back(
        fmt::format("At the plateau (under 3 % per doubling): {}.", fmt::join(plateau_of, ", ")));
  if (!short_of.empty())
    verdict.push_back(fmt::format(
        "Not yet at the plateau, more training stores more (`--more-exposures` trains longer): "
        "{}.",
        fmt::join(short_of, ", ")));
  std::vector<std::vector<std::string>> rows;
  for (const auto& b : ranked)
    rows.push_back({"`" + b.kind + "`", std::to_string(b.params), std::to_string(b.facts),
                    fmt::format("{:.3f}", b.accuracy), fmt::format("{:.3f}", b.bits_per_param),
                    b.stored, fmt::format("{:.0f} %", 100 * b.bits_per_param / 2.0),
                    fmt::format("{:.0f} %", 100 * b.bits_per_param / 3.6)});
  json plateau = json::array();
  for (const auto& b : ranked)
    plateau.push_back({{"kind", b.kind},
                       {"params", b.params},
                       {"facts", b.facts},
                       {"steps", b.steps},
                       {"bits_per_param", b.bits_per_param}});
  write_file_atomic(path("facts_sweep.json"),
                    json{{"subjects", subjects},
                         {"relations", relations},
                         {"objects", objects},
                         {"exposures_per_fact", c_.steps > 0 ? json(nullptr) : json(exposures)},
                         {"batch_size", batch},
                         {"points", points},
                         {"plateau", plateau},
                         {"more_training", more_json},
                         {"literature", {{"allen_zhu_li", 2.0}, {"morris_et_al", 3.6}}}}
                            .dump(2) +
                        "\n");
  render_plot(
      path("facts_sweep.png"), data.str(),
      [&](const std::string& f) {
        std::string gp =
            "set multiplot layout 1,3\nset grid\nset logscale x 2\nset xlabel 'facts'\n"
            "set key top left\nset title 'bits stored'\nset ylabel 'bits'\nplot ";
        for (size_t i = 0; i < variants.size(); ++i)
          gp +=
              fmt::format("'{}' index {} using 1:2 with linespoints pt 7 lc {} title '{}'{}", f, i,
                          plot_colour(i), variants[i].name, i + 1 < variants.size() ? ", " : "\n");
        gp +=
            "set title 'bits per parameter (dashed: 2 and 3.6 of the literature)'\n"
            "set ylabel 'bits / parameter'\nset key off\nplot ";
        for (size_t i = 0; i < variants.size(); ++i)
          gp += fmt::format("'{}' index {} using 1:3 with linespoints pt 7 lc {} notitle, ", f, i,
                            plot_colour(i));
        gp += "2 dt 2 lc rgb 'black' notitle, 3.6 dt 3 lc rgb 'black' notitle\n";
        gp +=
            "set title 'trained longer, at the largest table'\nset xlabel 'exposures per fact'\n"
            "set key top left\nplot ";
        for (size_t j = 0; j < longer.size(); ++j)
          gp += fmt::format("'{}' index {} using 1:2 with linespoints pt 7 lc {} title '{}', ", f,
                            variants.size() + j, plot_colour(longer[j]->variant), longer[j]->kind);
        gp += "2 dt 2 lc rgb 'black' notitle, 3.6 dt 3 lc rgb 'black' notitle\nunset multiplot\n";
        return gp;
      },
      2400, 560);
  ExperimentResult out;
  out.title = "Facts to saturation, per feed-forward kind";
  out.json = "facts_sweep.json";
  out.plot = "facts_sweep.png";
  out.markdown = fmt::format(
      "`recall experiment facts{}`: random (subject, relation) -> object facts over {} x {} "
      "cells and {} objects (log2 {} = {:.0f} bits a fact), in facts-tiny's one-layer d = 32 "
      "model with each feed-forward store at 12 d^2 parameters (mlp and linear width 6 d, glu 4 "
      "d, learned_kv 160 slots), batches of {} (lr 3e-3) over {} facts, {}. Bits stored = "
      "facts x (log2 objects - cross-entropy in bits), per parameter of the whole model. Below "
      "capacity a table is stored whole (bits stored = facts x log2 objects); past it, at equal "
      "exposures, bits stored stop rising, and a kind's sweep stops once twice the facts add "
      "under 5 % to them. At each kind's best point, ranked:\n\n{}\n"
      "This ranks the kinds at equal and short training: a kind that learns slowly ranks lower "
      "here than at its plateau (`--more-kinds all` trains every kind longer). Trained longer, at "
      "the largest table (exposures per fact: bits per parameter; the last link's gain per "
      "doubling of the exposures):\n\n{}\n{}\n\n"
      "![facts](facts_sweep.png)\n",
      fmt::format("{}{}{}{}", c_.quick ? " --quick" : "",
                  c_.steps > 0 ? fmt::format(" --steps {}", c_.steps) : std::string(),
                  c_.more_exposures.empty()
                      ? std::string()
                      : fmt::format(" --more-exposures {}", fmt::join(c_.more_exposures, ",")),
                  c_.more_kinds.empty()
                      ? std::string()
                      : fmt::format(" --more-kinds {}", fmt::join(c_.more_kinds, ","))),
      subjects, relations, objects, objects, std::log2(objects), batch, fmt::join(grid, ", "),
      c_.steps > 0 ? fmt::format("{} steps per point", c_.steps)
                   : fmt::format("each fact seen {} times (steps = facts x {} / {})", exposures,
                                 exposures, batch),
      markdown_table({"ffn", "parameters", "facts", "accuracy", "bits / param",
                      "bits stored by facts", "of 2 (Allen-Zhu & Li)", "of 3.6 (Morris et al.)"},
                     rows),
      markdown_table({"ffn", "facts", "exposures: bits / param", "last gain", "plateau"},
                     more_rows),
      fmt::join(verdict, " "));
  return out;
}

}  // namespace recall::experiment_detail
