// Report section 6: facts stored by an MLP and by learned key-values at equal parameters, each then
// read as a store (recall train, recall inspect).
#include "experiment_facts_kv.h"

namespace recall::experiment_detail {

FactsKvFound Experiment::facts_kv() {
  FactsKvFound found;
  found.steps = steps(sizes().facts_kv_steps);
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"mlp", {}}, {"learned_kv", {"ffn=learned_kv", "ffn_slots=96"}}};
  for (const auto& [name, sets] : runs) {
    auto all_sets = sets;
    all_sets.push_back(fmt::format("steps={}", found.steps));
    const std::string dir = run_dir(fmt::format("facts-{}-{}", name, found.steps));
    const TrainResult tr =
        recall::train_run(train_config_from_file("facts-tiny", all_sets), dir, context());
    Restored r = restore(dir);
    const InspectResult ir = inspect(r, InspectConfig{}, dir);
    found.runs.push_back({name, r.model->num_parameters(), tr.eval, ir});
  }
  return found;
}

}  // namespace recall::experiment_detail
