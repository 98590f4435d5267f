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
#include "recall/experiments/experiments.h"
#include "recall/experiments/report.h"
#include "recall/formats/plot.h"
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

namespace {

// What the facts experiment trains: 128 x 128 (subject, relation) cells with 256 objects, 8 bits
// a fact, 131072 bits at most, in a one-layer d = 32 model of about 33k parameters, so that the
// table is not what limits bits per parameter. Every feed-forward store has 12 d^2 parameters.
struct FactsPlan {
  int64_t subjects = 128, relations = 128, objects = 256;
  // Every point sees each fact equally often (exposures = steps x batch / facts): with a fixed
  // number of steps a larger table would only be less trained, and bits stored would fall past
  // the best point for that reason alone. --steps N fixes the steps instead (fixed_steps). The
  // kinds are ranked at these exposures; the best is then trained longer, which is where the
  // plateau shows.
  int64_t batch = 512, exposures = 0, fixed_steps = 0;
  std::vector<int64_t> grid;    // numbers of facts
  std::vector<int64_t> longer;  // multiples of the largest table's steps trained again

  FactsPlan(const ExperimentConfig& c, const ExperimentSizes& s)
      : exposures(s.facts_exposures),
        fixed_steps(c.steps),
        grid(s.facts_grid),
        longer(s.facts_longer) {}
  int64_t steps_for(int64_t n) const {
    return fixed_steps > 0 ? fixed_steps : std::max<int64_t>(100, n * exposures / batch);
  }
  std::vector<std::string> sets_for(const FfnVariant& v, int64_t n, int64_t s) const {
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
  }
  std::string run_name(const std::string& kind, int64_t n, int64_t s) const {
    return fmt::format("facts/{}-{}-{}steps", kind, n, s);
  }
};

// One kind's sweep over the number of facts: its best point by bits per parameter.
struct KindSweep {
  std::string kind;
  size_t variant = 0;  // its index in facts_variants()
  int64_t params = 0, facts = 0, steps = 0;
  double bits_per_param = -1e9, accuracy = 0;
  int64_t largest = 0, largest_steps = 0;  // the largest table trained, where training longer
  double largest_bits_per_param = 0;       // shows whether exposures still limit bits stored
  std::string stored;                      // bits stored at each number of facts
};

// Trains kind i on the plan's tables, from the smallest, until twice the facts add under 5 % to
// bits stored (past capacity larger tables would only repeat the plateau). Appends each point to
// `points` and a data block (facts bits_stored bits_per_param) to `data`.
KindSweep sweep_kind(const Experiment& x, const FactsPlan& plan, size_t i, json& points,
                     std::ostringstream& data) {
  const FfnVariant& v = facts_variants()[i];
  KindSweep b;
  b.kind = v.name;
  b.variant = i;
  double last_bits = 0;
  for (int64_t n : plan.grid) {
    const int64_t steps = plan.steps_for(n);
    const auto tr =
        x.train_run("facts-tiny", plan.sets_for(v, n, steps), plan.run_name(v.name, n, steps));
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
         {"exposures_per_fact", static_cast<double>(steps * plan.batch) / n},
         {"accuracy", e.at("accuracy")},
         {"bits_stored", e.at("bits")},
         {"bits_per_param", e.at("bits_per_param")}});
    data << n << ' ' << e.at("bits") << ' ' << e.at("bits_per_param") << '\n';
    b.params = params;
    b.stored += fmt::format("{}{}: {:.1f}k", b.stored.empty() ? "" : ", ", n, e.at("bits") / 1000);
    if (e.at("bits_per_param") > b.bits_per_param) {
      b.bits_per_param = e.at("bits_per_param");
      b.facts = n;
      b.steps = steps;
      b.accuracy = e.at("accuracy");
    }
    b.largest = n;
    b.largest_steps = steps;
    b.largest_bits_per_param = e.at("bits_per_param");
    if (last_bits > 0 && e.at("bits") < 1.05 * last_bits) break;
    last_bits = e.at("bits");
  }
  data << "\n\n";
  return b;
}

// The kinds trained longer (the best, or --more-kinds) in the ranking's order, and each chain's
// steps, checked before any of them trains: with --steps fixed, an exposure can mean fewer steps
// than the sweep's own run. Without --more-exposures, the multiples of the largest table's steps
// in the row's sizes (facts_longer).
std::vector<std::pair<const KindSweep*, std::vector<int64_t>>> plan_longer(
    const ExperimentConfig& c, const FactsPlan& plan, const std::vector<KindSweep>& ranked) {
  const auto& mk = c.more_kinds;
  auto trained_longer = [&](const std::string& kind) {
    if (mk.empty()) return kind == ranked.front().kind;
    return mk.front() == "all" || std::find(mk.begin(), mk.end(), kind) != mk.end();
  };
  std::vector<std::pair<const KindSweep*, std::vector<int64_t>>> longer;
  for (const auto& k : ranked) {
    if (!trained_longer(k.kind)) continue;
    std::vector<int64_t> steps;
    for (const int64_t e : c.more_exposures) steps.push_back(k.largest * e / plan.batch);
    if (steps.empty())
      for (const int64_t times : plan.longer) steps.push_back(times * k.largest_steps);
    check_arg(steps.front() > k.largest_steps,
              fmt::format("--more-exposures: {} steps at {} facts are not more than the {} "
                          "already trained; give larger exposures",
                          steps.front(), k.largest, k.largest_steps));
    longer.emplace_back(&k, steps);
  }
  return longer;
}

// The chains of longer training, as JSON, table rows and the text's verdicts.
struct LongerTraining {
  json chains = json::array();
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> plateau_of, short_of;
};

// Trains kind k at its largest table for each of `steps`; the chain's last link, as a gain per
// doubling, under 3 % is the kind's plateau. Appends a data block (exposures bits_per_param).
void train_longer(const Experiment& x, const FactsPlan& plan, const KindSweep& k,
                  const std::vector<int64_t>& steps, LongerTraining& out,
                  std::ostringstream& data) {
  struct More {
    int64_t steps = 0;
    double bits_per_param = 0;
  };
  const int64_t largest = k.largest;
  std::vector<More> more = {{k.largest_steps, k.largest_bits_per_param}};
  for (const int64_t s : steps) {
    const auto tr =
        x.train_run("facts-tiny", plan.sets_for(facts_variants()[k.variant], largest, s),
                    plan.run_name(k.kind, largest, s));
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
    const double e = static_cast<double>(m.steps * plan.batch) / largest;
    chain.push_back(
        {{"steps", m.steps}, {"exposures_per_fact", e}, {"bits_per_param", m.bits_per_param}});
    cells += fmt::format("{}{:.0f}: {:.3f}", cells.empty() ? "" : ", ", e, m.bits_per_param);
    data << e << ' ' << m.bits_per_param << '\n';
  }
  data << "\n\n";
  out.chains.push_back({{"kind", k.kind},
                        {"facts", largest},
                        {"points", chain},
                        {"last_gain_per_doubling", json_or_null(gain)},
                        {"plateau", at_plateau}});
  out.rows.push_back({"`" + k.kind + "`", std::to_string(largest), cells,
                      gain ? fmt::format("{:+.1f} %", 100 * *gain) : "—",
                      at_plateau ? "yes" : "not yet"});
  (at_plateau ? out.plateau_of : out.short_of)
      .push_back(
          fmt::format("`{}` {}{:.3f}", k.kind, at_plateau ? "" : "at least ", last.bits_per_param));
}

// The plot: bits stored and bits per parameter against facts per kind (data blocks 0 .. kinds -
// 1), and bits per parameter against exposures for the kinds trained longer (the blocks after).
std::string facts_plot_script(const std::string& f, const std::vector<const KindSweep*>& longer) {
  const std::vector<FfnVariant>& variants = facts_variants();
  std::string gp =
      "set multiplot layout 1,3\nset grid\nset logscale x 2\nset xlabel 'facts'\n"
      "set key top left\nset title 'bits stored'\nset ylabel 'bits'\nplot ";
  for (size_t i = 0; i < variants.size(); ++i)
    gp += fmt::format("'{}' index {} using 1:2 with linespoints pt 7 lc {} title '{}'{}", f, i,
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
}

// The report section's text around the ranking's table and the longer training's.
std::string facts_markdown(const ExperimentConfig& c, const FactsPlan& plan,
                           const std::vector<KindSweep>& ranked, const LongerTraining& more) {
  std::vector<std::string> verdict;
  if (!more.plateau_of.empty())
    verdict.push_back(fmt::format("At the plateau (under 3 % per doubling): {}.",
                                  fmt::join(more.plateau_of, ", ")));
  if (!more.short_of.empty())
    verdict.push_back(fmt::format(
        "Not yet at the plateau, more training stores more (`--more-exposures` trains longer): "
        "{}.",
        fmt::join(more.short_of, ", ")));
  std::vector<std::vector<std::string>> rows;
  for (const auto& b : ranked)
    rows.push_back({"`" + b.kind + "`", std::to_string(b.params), std::to_string(b.facts),
                    fmt::format("{:.3f}", b.accuracy), fmt::format("{:.3f}", b.bits_per_param),
                    b.stored, fmt::format("{:.0f} %", 100 * b.bits_per_param / 2.0),
                    fmt::format("{:.0f} %", 100 * b.bits_per_param / 3.6)});
  const std::string flags = fmt::format(
      "{}{}{}{}", c.quick ? " --quick" : "",
      c.steps > 0 ? fmt::format(" --steps {}", c.steps) : std::string(),
      c.more_exposures.empty()
          ? std::string()
          : fmt::format(" --more-exposures {}", fmt::join(c.more_exposures, ",")),
      c.more_kinds.empty() ? std::string()
                           : fmt::format(" --more-kinds {}", fmt::join(c.more_kinds, ",")));
  return fmt::format(
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
      flags, plan.subjects, plan.relations, plan.objects, plan.objects, std::log2(plan.objects),
      plan.batch, fmt::join(plan.grid, ", "),
      c.steps > 0 ? fmt::format("{} steps per point", c.steps)
                  : fmt::format("each fact seen {} times (steps = facts x {} / {})", plan.exposures,
                                plan.exposures, plan.batch),
      markdown_table({"ffn", "parameters", "facts", "accuracy", "bits / param",
                      "bits stored by facts", "of 2 (Allen-Zhu & Li)", "of 3.6 (Morris et al.)"},
                     rows),
      markdown_table({"ffn", "facts", "exposures: bits / param", "last gain", "plateau"},
                     more.rows),
      fmt::join(verdict, " "));
}

}  // namespace

ExperimentResult Experiment::facts() {
  const FactsPlan plan(config_, sizes());
  json points = json::array();
  std::ostringstream data;  // one block per kind, then one per kind trained longer
  std::vector<KindSweep> ranked;
  for (size_t i = 0; i < facts_variants().size(); ++i)
    ranked.push_back(sweep_kind(*this, plan, i, points, data));
  std::stable_sort(ranked.begin(), ranked.end(), [](const KindSweep& a, const KindSweep& b) {
    return a.bits_per_param > b.bits_per_param;
  });
  LongerTraining more;
  std::vector<const KindSweep*> longer;
  for (const auto& [k, steps] : plan_longer(config_, plan, ranked)) {
    train_longer(*this, plan, *k, steps, more, data);
    longer.push_back(k);
  }
  json plateau = json::array();
  for (const auto& b : ranked)
    plateau.push_back({{"kind", b.kind},
                       {"params", b.params},
                       {"facts", b.facts},
                       {"steps", b.steps},
                       {"bits_per_param", b.bits_per_param}});
  write_json("facts_sweep.json",
             {{"subjects", plan.subjects},
              {"relations", plan.relations},
              {"objects", plan.objects},
              {"exposures_per_fact", config_.steps > 0 ? json(nullptr) : json(plan.exposures)},
              {"batch_size", plan.batch},
              {"points", points},
              {"plateau", plateau},
              {"more_training", more.chains},
              {"literature", {{"allen_zhu_li", 2.0}, {"morris_et_al", 3.6}}}});
  render_plot(
      path("facts_sweep.png"), data.str(),
      [&](const std::string& f) { return facts_plot_script(f, longer); }, 2400, 560);
  return {"Facts to saturation, per feed-forward kind", "facts_sweep.json", "facts_sweep.png",
          facts_markdown(config_, plan, ranked, more)};
}

}  // namespace recall::experiment_detail
