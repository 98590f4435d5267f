// `recall experiment` scaling: capacity laws from theory and the probe
// (recall/experiments/experiments.h).
#include "experiment_scaling.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "recall/analysis/extrapolate.h"
#include "recall/analysis/inspect.h"
#include "recall/analysis/probe.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/experiments/experiments.h"
#include "recall/experiments/report.h"
#include "recall/stores/theory.h"
#include "recall/train/trainer.h"

namespace recall::experiment_detail {

namespace {

// Every store at every value of its variable, probed where theory is within the probe's limit.
std::vector<CapacityPoint> capacity_points(const ScalingFound& plan) {
  std::vector<CapacityPoint> pts;
  auto add = [&](const std::string& store, const std::string& variable, double value, int64_t d,
                 double beta) {
    CapacityPoint p{
        store, variable, value, d, beta, theory_capacity(StoreSpec::parse(store, beta), d), {}};
    if (p.theory && *p.theory <= plan.probe_limit) {
      ProbeConfig probing;
      probing.stores = {store};
      probing.d_k = probing.d_v = d;
      probing.beta = beta;
      probing.trials = plan.trials;
      probing.queries = plan.queries;
      probing.rules = {};
      probing.seed = static_cast<uint64_t>(pts.size());
      const auto r = run_probe(probing);
      p.probe = r.stores.front().capacity.rms;
    }
    pts.push_back(p);
  };
  for (const char* store : {"outer_product", "relu", "relu2"})
    for (int64_t d : plan.dims) add(store, "d_k", static_cast<double>(d), d, 8.0);
  for (int p = 1; p <= 4; ++p) add(fmt::format("relu{}", p), "p", p, 32, 8.0);
  for (int n = 2; n <= 5; ++n) add(fmt::format("exp{}", n), "n", n, 64, 8.0);
  for (double beta : {2.0, 4.0, 6.0, 8.0, 12.0, 16.0}) add("softmax", "beta", beta, 64, beta);
  return pts;
}

// The probe of the per-M ISR of outer product and least squares (the section sets their closed
// forms beside it).
ProbeConfig isr_probing(const ScalingFound& plan) {
  ProbeConfig probing;
  probing.stores = {"outer_product", "least_squares"};
  probing.m = {16, 64, 256, 1024, 4096, 16384};
  probing.trials = plan.trials;
  probing.queries = plan.queries;
  probing.rules = {};
  return probing;
}

}  // namespace

ScalingFound Experiment::scaling() {
  ScalingFound found;
  found.trials = sizes().scaling_trials;
  found.queries = sizes().scaling_queries;
  found.probe_limit = sizes().scaling_probe_limit;
  found.dims = sizes().scaling_dims;
  found.points = capacity_points(found);
  found.isr_probing = isr_probing(found);
  found.isr = run_probe(found.isr_probing);
  return found;
}

}  // namespace recall::experiment_detail
