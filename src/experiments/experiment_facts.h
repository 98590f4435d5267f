// `recall experiment` facts, bits per parameter to saturation: what it measures
// (experiment_facts.cpp) and its writer (experiment_facts_output.cpp).
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "experiment.h"

namespace recall::experiment_detail {

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

// One point of a kind's sweep: a table of `facts` trained for `steps`, its run's last evaluation.
struct FactsPoint {
  int64_t facts = 0, steps = 0;
  int64_t params = 0;                                 // of the whole model
  double accuracy = 0, bits = 0, bits_per_param = 0;  // bits stored, and per parameter
};

// One kind's sweep over the number of facts: its best point by bits per parameter.
struct KindSweep {
  std::string kind;
  size_t variant = 0;  // its index in facts_variants()
  int64_t params = 0, facts = 0, steps = 0;
  double bits_per_param = -1e9, accuracy = 0;
  int64_t largest = 0, largest_steps = 0;  // the largest table trained, where training longer
  double largest_bits_per_param = 0;       // shows whether exposures still limit bits stored
  std::vector<FactsPoint> points;          // every table trained, the smallest first
};

// A kind trained longer at its largest table: bits per parameter at each number of steps.
struct FactsChain {
  struct More {
    int64_t steps = 0;
    double bits_per_param = 0;
  };
  std::string kind;
  size_t variant = 0;          // its index in facts_variants()
  int64_t facts = 0;           // its largest table's
  std::vector<More> more;      // the sweep's own run at that table, then each longer training
  std::optional<double> gain;  // the last link's gain per doubling of the steps
  bool at_plateau = false;     // that gain under 3 %
};

// Every feed-forward kind swept over the number of facts, ranked, and the best (or --more-kinds)
// trained longer at its largest table.
struct FactsFound {
  FactsPlan plan;                  // the tables, the batch and the exposures trained
  std::vector<KindSweep> ranked;   // each kind's sweep, best bits per parameter first (stable)
  std::vector<FactsChain> longer;  // the kinds trained longer, in the ranking's order
};
ExperimentResult write_facts(const Experiment& experiment, const FactsFound& found);

}  // namespace recall::experiment_detail
