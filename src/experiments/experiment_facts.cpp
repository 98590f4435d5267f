// `recall experiment` facts: bits per parameter to saturation (recall/experiments/experiments.h).
#include "experiment_facts.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "recall/core/error.h"
#include "recall/experiments/experiments.h"

namespace recall::experiment_detail {

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

// Trains kind i on the plan's tables, from the smallest, until twice the facts add under 5 % to
// bits stored (past capacity larger tables would only repeat the plateau). Keeps each point.
KindSweep sweep_kind(const Experiment& x, const FactsPlan& plan, size_t i) {
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
    b.points.push_back({n, steps, params, e.at("accuracy"), e.at("bits"), e.at("bits_per_param")});
    b.params = params;
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

// Trains kind k at its largest table for each of `steps`; the chain's last link, as a gain per
// doubling, under 3 % is the kind's plateau.
FactsChain train_longer(const Experiment& x, const FactsPlan& plan, const KindSweep& k,
                        const std::vector<int64_t>& steps) {
  FactsChain chain;
  chain.kind = k.kind;
  chain.variant = k.variant;
  chain.facts = k.largest;
  const int64_t largest = k.largest;
  std::vector<FactsChain::More>& more = chain.more;
  more = {{k.largest_steps, k.largest_bits_per_param}};
  for (const int64_t s : steps) {
    const auto tr =
        x.train_run("facts-tiny", plan.sets_for(facts_variants()[k.variant], largest, s),
                    plan.run_name(k.kind, largest, s));
    more.push_back({s, tr.eval.at("bits_per_param")});
  }
  const FactsChain::More& last = more.back();
  const FactsChain::More& before = more[more.size() - 2];
  chain.gain =
      gain_per_doubling(before.steps, before.bits_per_param, last.steps, last.bits_per_param);
  chain.at_plateau = plateau_reached(chain.gain);
  return chain;
}

}  // namespace

FactsFound Experiment::facts() {
  FactsFound found{FactsPlan(config_, sizes()), {}, {}};
  const FactsPlan& plan = found.plan;
  std::vector<KindSweep>& ranked = found.ranked;
  for (size_t i = 0; i < facts_variants().size(); ++i) ranked.push_back(sweep_kind(*this, plan, i));
  std::stable_sort(ranked.begin(), ranked.end(), [](const KindSweep& a, const KindSweep& b) {
    return a.bits_per_param > b.bits_per_param;
  });
  for (const auto& [k, steps] : plan_longer(config_, plan, ranked))
    found.longer.push_back(train_longer(*this, plan, *k, steps));
  return found;
}

}  // namespace recall::experiment_detail
