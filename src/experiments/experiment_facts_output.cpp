// `recall experiment` facts' files: facts_sweep.json, facts_sweep.png and the section (each kind's
// best point, ranked, and the chains of longer training with their verdicts).
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "experiment_facts.h"
#include "recall/experiments/report.h"
#include "recall/formats/plot.h"

namespace recall::experiment_detail {

using nlohmann::json;

namespace {

// Kind b's points, appended to `points`, and its data block (facts bits_stored bits_per_param),
// to `data`.
void sweep_points(const FactsPlan& plan, const KindSweep& b, json& points,
                  std::ostringstream& data) {
  const auto [ffn, activation] = feed_forward_from_name(b.kind);
  for (const FactsPoint& p : b.points) {
    points.push_back(
        {{"ffn", to_string(ffn)},
         {"activation", ffn == FfnKind::kMlp || ffn == FfnKind::kGlu ? json(to_string(activation))
                                                                     : json(nullptr)},
         {"kind", b.kind},
         {"params", p.params},
         {"facts", p.facts},
         {"steps", p.steps},
         {"exposures_per_fact", static_cast<double>(p.steps * plan.batch) / p.facts},
         {"accuracy", p.accuracy},
         {"bits_stored", p.bits},
         {"bits_per_param", p.bits_per_param}});
    data << p.facts << ' ' << p.bits << ' ' << p.bits_per_param << '\n';
  }
  data << "\n\n";
}

// Bits stored at each number of facts of kind b's sweep: "128: 1.0k, 256: 2.0k".
std::string bits_stored(const KindSweep& b) {
  std::string stored;
  for (const FactsPoint& p : b.points)
    stored += fmt::format("{}{}: {:.1f}k", stored.empty() ? "" : ", ", p.facts, p.bits / 1000);
  return stored;
}

// The chains of longer training, as JSON, table rows and the text's verdicts.
struct LongerTraining {
  json chains = json::array();
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> plateau_of, short_of;
};

// Chain k's JSON, table row and verdict, appended to `out`, and its data block (exposures
// bits_per_param), to `data`.
void longer_chain(const FactsPlan& plan, const FactsChain& k, LongerTraining& out,
                  std::ostringstream& data) {
  const int64_t largest = k.facts;
  const FactsChain::More& last = k.more.back();
  const std::optional<double>& gain = k.gain;
  const bool at_plateau = k.at_plateau;
  json chain = json::array();
  std::string cells;
  for (const auto& m : k.more) {
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
std::string facts_plot_script(const std::string& f, const std::vector<FactsChain>& longer) {
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
                      variants.size() + j, plot_colour(longer[j].variant), longer[j].kind);
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
                    bits_stored(b), fmt::format("{:.0f} %", 100 * b.bits_per_param / 2.0),
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

ExperimentResult write_facts(const Experiment& experiment, const FactsFound& found) {
  const ExperimentConfig& config = experiment.config();
  const FactsPlan& plan = found.plan;
  const std::vector<KindSweep>& ranked = found.ranked;
  // the sweeps in facts_variants()'s order, as they were trained
  std::vector<const KindSweep*> swept(ranked.size());
  for (const auto& b : ranked) swept[b.variant] = &b;
  json points = json::array();
  std::ostringstream data;  // one block per kind, then one per kind trained longer
  for (const KindSweep* b : swept) sweep_points(plan, *b, points, data);
  LongerTraining more;
  for (const FactsChain& k : found.longer) longer_chain(plan, k, more, data);
  json plateau = json::array();
  for (const auto& b : ranked)
    plateau.push_back({{"kind", b.kind},
                       {"params", b.params},
                       {"facts", b.facts},
                       {"steps", b.steps},
                       {"bits_per_param", b.bits_per_param}});
  experiment.write_json(
      "facts_sweep.json",
      {{"subjects", plan.subjects},
       {"relations", plan.relations},
       {"objects", plan.objects},
       {"exposures_per_fact", config.steps > 0 ? json(nullptr) : json(plan.exposures)},
       {"batch_size", plan.batch},
       {"points", points},
       {"plateau", plateau},
       {"more_training", more.chains},
       {"literature", {{"allen_zhu_li", 2.0}, {"morris_et_al", 3.6}}}});
  render_plot(
      experiment.path("facts_sweep.png"), data.str(),
      [&](const std::string& f) { return facts_plot_script(f, found.longer); }, 2400, 560);
  return {"Facts to saturation, per feed-forward kind", "facts_sweep.json", "facts_sweep.png",
          facts_markdown(config, plan, ranked, more)};
}

}  // namespace recall::experiment_detail
