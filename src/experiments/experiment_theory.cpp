// Report section 1: the capacity of random stores from the exact theory, beside the essay's
// figures (recall theory).
#include <map>

#include "experiment.h"
#include "recall/analysis/probe_output.h"
#include "recall/stores/theory.h"

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

ExperimentResult Experiment::theory() {
  std::vector<std::vector<std::string>> rows;
  for (const auto& name : default_store_names()) {
    const auto spec = StoreSpec::parse(name, 8.0);
    rows.push_back({"`" + name + "`", opt_num(theory_capacity(spec, 64), "{:.6g}"),
                    opt_num(theory_capacity(spec, 64, KeyLaw::kGaussian), "{:.6g}"),
                    essay_capacity(name)});
  }
  write_file_atomic(path("theory.json"), theory_json(64, 8.0));
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
