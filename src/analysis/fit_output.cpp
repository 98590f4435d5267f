// The table and JSON of `recall fit`.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "recall/analysis/fit.h"

namespace recall {

std::string fit_table(const FitResult& r) {
  const auto& c = r.config;
  std::string out = fmt::format(
      "fit {}: width N = {}, d_k = d_v = {}, {} Adam steps per M (lr {}, cosine), seed {}\n"
      "recalled: f(x_j) nearest to v_j among all M values (cosine); capacity: largest M with "
      ">= {:.4g} recalled\n\n",
      to_string(c.kind), c.width, c.d_k, c.steps, c.lr, c.seed, c.target);
  out += fmt::format("{:>8} {:>10} {:>12}\n", "M", "recalled", "mse");
  for (const auto& t : r.trials)
    out += fmt::format("{:>8} {:>10.4f} {:>12.4g}\n", t.M, t.recalled, t.loss);
  out += fmt::format(
      "\n{:<34} {:>10}{}\n{:<34} {:>10}\n{:<34} {:>10.4f}\n{:<34} {:>10.4f}   (M log2 M / "
      "params)\n",
      "fitted capacity (memories)", r.capacity, r.capped ? " (reached --m-max)" : "", "parameters",
      r.parameters, "memories per parameter", r.memories_per_param, "bits per parameter",
      r.bits_per_param);
  const auto spec = c.constructed_spec();
  if (spec && r.theory)
    out += fmt::format("{:<34} {:>10.4g}   ({} store, random unit keys, d = {})\n",
                       "theory capacity of the weights", *r.theory, spec->name(), c.d_k);
  else
    out += fmt::format("{:<34} {:>10}   (no random-key theory for {})\n",
                       "theory capacity of the weights", "n/a", to_string(c.kind));
  if (r.constructed)
    out += fmt::format("{:<34} {:>10.4g}   (min(N, theory): N written memories)\n",
                       "constructed store of width N", *r.constructed);
  else
    out += fmt::format("{:<34} {:>10}\n", "constructed store of width N", "n/a");
  out += fmt::format("{:<34} {:>10.3f}\n", "seconds", r.seconds);
  return out;
}

std::string fit_json(const FitResult& r) {
  using nlohmann::json;
  const auto& c = r.config;
  json trials = json::array();
  for (const auto& t : r.trials)
    trials.push_back({{"M", t.M}, {"recalled", t.recalled}, {"mse", t.loss}});
  json out{{"config",
            {{"kind", to_string(c.kind)},
             {"width", c.width},
             {"d_k", c.d_k},
             {"steps", c.steps},
             {"lr", c.lr},
             {"target", c.target},
             {"m_max", c.max_memories()},
             {"seed", c.seed}}},
           {"recall_criterion", "nearest value by cosine among all M"},
           {"bits_definition", "M log2 M"},
           {"capacity", r.capacity},
           {"capped", r.capped},
           {"parameters", r.parameters},
           {"memories_per_param", r.memories_per_param},
           {"bits_per_param", r.bits_per_param},
           {"constructed_store",
            c.constructed_spec() ? json(c.constructed_spec()->name()) : json(nullptr)},
           {"theory_capacity", r.theory ? json(*r.theory) : json(nullptr)},
           {"constructed_capacity", r.constructed ? json(*r.constructed) : json(nullptr)},
           {"trials", trials},
           {"seconds", r.seconds}};
  return out.dump(2) + "\n";
}

}  // namespace recall
