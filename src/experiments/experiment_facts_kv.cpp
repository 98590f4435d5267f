// Report section 6: facts stored by an MLP and by learned key-values at equal parameters, each then
// read as a store (recall train, recall inspect).
#include "experiment.h"
#include "recall/analysis/inspect.h"

namespace recall::experiment_detail {

ExperimentResult Experiment::facts_kv() {
  const int64_t facts_steps = steps(sizes().facts_kv_steps);
  std::vector<std::vector<std::string>> rows;
  nlohmann::json all = nlohmann::json::array();
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"mlp", {}}, {"learned_kv", {"ffn=learned_kv", "ffn_slots=96"}}};
  for (const auto& [name, sets] : runs) {
    auto all_sets = sets;
    all_sets.push_back(fmt::format("steps={}", facts_steps));
    const std::string dir = run_dir(fmt::format("facts-{}-{}", name, facts_steps));
    const TrainResult tr =
        recall::train_run(train_config_from_file("facts-tiny", all_sets), dir, context());
    Restored r = restore(dir);
    const InspectResult ir = inspect(r, InspectConfig{}, dir);
    const auto& f = ir.ffn.front();
    rows.push_back({"`" + name + "`", std::to_string(r.model->num_parameters()),
                    fmt::format("{:.3f}", tr.eval.at("accuracy")),
                    fmt::format("{:.0f}", tr.eval.at("bits")),
                    fmt::format("{:.3f}", tr.eval.at("bits_per_param")), std::to_string(f.keys),
                    fmt::format("{:.3g}", f.isr.median), fmt::format("{:.3f}", f.recalled),
                    f.theory ? fmt::format("{:.4g} ({})", *f.theory, f.theory_store) : "—"});
    all.push_back({{"ffn", name},
                   {"parameters", r.model->num_parameters()},
                   {"eval", tr.eval},
                   {"inspect", nlohmann::json::parse(inspect_json(ir))}});
  }
  write_json("facts.json", all);
  ExperimentResult out;
  out.title = "Facts: an MLP against learned key-values at equal parameters";
  out.json = "facts.json";
  out.markdown = fmt::format(
      "`recall train --config facts-tiny --set steps={}` (and `--set ffn=learned_kv --set "
      "ffn_slots=96`): 8192 random (subject, relation) -> object facts, 5 bits each, in a "
      "one-layer model; bits stored = facts x (5 - cross-entropy in bits). Each FFN is then "
      "read as a store (`recall inspect`): its keys queried through its own weights.\n\n{}",
      facts_steps,
      markdown_table({"ffn", "parameters", "accuracy", "bits stored", "bits / param", "FFN keys",
                      "key ISR median", "keys with ISR < 1", "random-key theory"},
                     rows));
  return out;
}

}  // namespace recall::experiment_detail
