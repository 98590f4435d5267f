// Report section 5: stores trained to hold random memories against stores written to hold them, at
// the same width (recall fit).
#include "experiment_fit.h"

namespace recall::experiment_detail {

FitFound Experiment::fit() {
  const ExperimentSizes& size = sizes();
  FitFound found;
  found.steps = steps(size.fit_steps);
  for (const char* kind : {"mlp-relu", "mlp-relu2", "glu-silu", "learned_kv"})
    for (int64_t width : size.fit_widths) {
      FitConfig fc;
      fc.kind = fit_kind_from_string(kind);
      fc.width = width;
      fc.steps = found.steps;
      found.kinds.push_back(kind);
      found.results.push_back(fit_capacity(fc));
    }
  return found;
}

}  // namespace recall::experiment_detail
