// Report section 1's files: theory.json and the section (each store's capacity from the exact
// theory and the Gaussian shortcut, beside the essay's figure).
#include <map>

#include "experiment_theory.h"
#include "recall/analysis/probe_output.h"

namespace recall::experiment_detail {

namespace {

// The essay's figures for d_k = 64, beta = 8 (its sections on each store).
const char* essay_capacity(const std::string& store) {
  static const std::map<std::string, const char*> essay = {
      {"outer_product", "~64"}, {"least_squares", "~128"}, {"relu", "~128"},
      {"relu2", "~2,700"},      {"swiglu", "~relu2"},      {"exp2", "~40"},
      {"exp3", "~450"},         {"exp4", "~3,100"},        {"softmax", "~1.2e6"}};
  auto it = essay.find(store);
  return it == essay.end() ? "—" : it->second;
}

}  // namespace

ExperimentResult write_theory(const Experiment& experiment, const TheoryFound& found) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < found.stores.size(); ++i) {
    const std::string& name = found.stores[i];
    rows.push_back({"`" + name + "`", opt_num(found.exact[i], "{:.6g}"),
                    opt_num(found.gaussian[i], "{:.6g}"), essay_capacity(name)});
  }
  write_file_atomic(experiment.path("theory.json"), theory_json(found.d_k, found.beta));
  ExperimentResult out;
  out.title = "Capacity of random stores: theory";
  out.json = "theory.json";
  out.markdown =
      "M where E[ISR^2] = 1 for keys and values uniform on the unit sphere, d_k = 64, "
      "beta = 8 (`recall theory`). The exact column integrates the similarity density of "
      "unit keys; the Gaussian shortcut (s ~ N(0, 1/d)) is the essay's.\n\n" +
      markdown_table({"store", "sphere keys (exact)", "Gaussian shortcut", "essay"}, rows);
  return out;
}

}  // namespace recall::experiment_detail
