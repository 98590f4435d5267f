// Report section 6's files: facts.json and the section (per feed-forward kind: parameters, bits
// stored, and its keys' ISR read as a store).
#include "experiment_facts_kv.h"

namespace recall::experiment_detail {

ExperimentResult write_facts_kv(const Experiment& experiment, const FactsKvFound& found) {
  std::vector<std::vector<std::string>> rows;
  nlohmann::json all = nlohmann::json::array();
  for (const auto& run : found.runs) {
    const std::string& name = run.ffn;
    const auto& eval = run.eval;
    const auto& f = run.inspection.ffn.front();
    rows.push_back({"`" + name + "`", std::to_string(run.parameters),
                    fmt::format("{:.3f}", eval.at("accuracy")),
                    fmt::format("{:.0f}", eval.at("bits")),
                    fmt::format("{:.3f}", eval.at("bits_per_param")), std::to_string(f.keys),
                    fmt::format("{:.3g}", f.isr.median), fmt::format("{:.3f}", f.recalled),
                    f.theory ? fmt::format("{:.4g} ({})", *f.theory, f.theory_store) : "—"});
    all.push_back({{"ffn", name},
                   {"parameters", run.parameters},
                   {"eval", eval},
                   {"inspect", nlohmann::json::parse(inspect_json(run.inspection))}});
  }
  experiment.write_json("facts.json", all);
  ExperimentResult out;
  out.title = "Facts: an MLP against learned key-values at equal parameters";
  out.json = "facts.json";
  out.markdown = fmt::format(
      "`recall train --config facts-tiny --set steps={}` (and `--set ffn=learned_kv --set "
      "ffn_slots=96`): 8192 random (subject, relation) -> object facts, 5 bits each, in a "
      "one-layer model; bits stored = facts x (5 - cross-entropy in bits). Each FFN is then "
      "read as a store (`recall inspect`): its keys queried through its own weights.\n\n{}",
      found.steps,
      markdown_table({"ffn", "parameters", "accuracy", "bits stored", "bits / param", "FFN keys",
                      "key ISR median", "keys with ISR < 1", "random-key theory"},
                     rows));
  return out;
}

}  // namespace recall::experiment_detail
