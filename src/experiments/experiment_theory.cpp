// Report section 1: the capacity of random stores from the exact theory, beside the essay's
// figures (recall theory).
#include "experiment_theory.h"

#include "recall/stores/theory.h"

namespace recall::experiment_detail {

TheoryFound Experiment::theory() {
  TheoryFound found;
  found.d_k = 64;
  found.beta = 8.0;
  for (const auto& name : default_store_names()) {
    const auto spec = StoreSpec::parse(name, found.beta);
    found.stores.push_back(name);
    found.exact.push_back(theory_capacity(spec, found.d_k));
    found.gaussian.push_back(theory_capacity(spec, found.d_k, KeyLaw::kGaussian));
  }
  return found;
}

}  // namespace recall::experiment_detail
