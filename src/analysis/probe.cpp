#include "recall/analysis/probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "recall/analysis/memory_stream.h"
#include "recall/analysis/probe_accumulator.h"
#include "recall/analysis/probe_fused.h"
#include "recall/analysis/probe_weights.h"
#include "recall/core/device.h"
#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/core/threads.h"
#include "recall/ops/kernels.h"
#include "recall/stores/isr.h"
#include "recall/stores/store.h"
#include "recall/stores/theory.h"

namespace recall {

namespace {

std::vector<double> to_vector(const torch::Tensor& t) {
  auto c = t.to(torch::kCPU, torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// An accumulator is shared by every store or rule point with the same weight function and queries.
using AccKey = std::tuple<int, int, int, double, int64_t>;
AccKey key_of(const WeightFunction& w, int64_t q) {
  return {static_cast<int>(w.kind), w.p, w.n,
          w.kind == WeightKind::kLinear || w.kind == WeightKind::kReluPow ||
                  w.kind == WeightKind::kSwiglu
              ? 0.0
              : w.beta,
          q};
}

bool streamed(const StoreSpec& spec, const ProbeConfig& c) {
  return spec.is_weight_function() && !c.reference;
}

}  // namespace

ProbePlan plan_probe(const ProbeConfig& config) {
  config.validate();
  ProbePlan plan;
  plan.config = config;
  std::map<AccKey, ProbeSum> sums;
  auto need = [&](const WeightFunction& w, int64_t q, int64_t M) {
    ProbeSum& a = sums[key_of(w, q)];
    a.weight = w;
    a.queries = q;
    a.end = std::max(a.end, M);
    a.snapshots.push_back(M);
  };
  for (const auto& name : config.store_names()) {
    plan.specs.push_back(StoreSpec::parse(name, config.beta));
    plan.grids.push_back(store_grid(config, name));
    if (streamed(plan.specs.back(), config))
      for (int64_t M : plan.grids.back()) need(plan.specs.back().weight, config.queries, M);
  }
  plan.rule_grid = rule_grid(config);
  for (BetaRule r : config.rules) {
    plan.rule_beta.emplace_back();
    for (int64_t M : plan.rule_grid) {
      plan.rule_beta.back().push_back(beta_for(r, M, config.ref_len, config.beta));
      need(softmax_weight(plan.rule_beta.back().back()), config.rule_queries, M);
    }
  }
  std::map<AccKey, int64_t> index;
  std::set<int64_t> boundaries;
  for (auto& [key, a] : sums) {
    std::sort(a.snapshots.begin(), a.snapshots.end());
    a.snapshots.erase(std::unique(a.snapshots.begin(), a.snapshots.end()), a.snapshots.end());
    boundaries.insert(a.snapshots.begin(), a.snapshots.end());
    plan.end_max = std::max(plan.end_max, a.end);
    plan.work += static_cast<double>(a.queries) * static_cast<double>(a.end);
    index[key] = static_cast<int64_t>(plan.sums.size());
    plan.sums.push_back(a);
  }
  plan.boundaries.assign(boundaries.begin(), boundaries.end());
  for (const auto& spec : plan.specs)
    plan.store_sum.push_back(streamed(spec, config) ? index.at(key_of(spec.weight, config.queries))
                                                    : -1);
  for (const auto& betas : plan.rule_beta) {
    plan.rule_sum.emplace_back();
    for (double beta : betas)
      plan.rule_sum.back().push_back(index.at(key_of(softmax_weight(beta), config.rule_queries)));
  }
  return plan;
}

namespace {

// Adds memories [c0, c1) (keys K, values V) to the accumulators active there, with torch ops on
// any device: the reference of the fused CPU path (probe_fused.cpp), and the path on CUDA. The
// similarities of the first q_max queries are one product; each accumulator's weights a pass or
// more of elementwise ops, and its sums one more product. Returns the multiply-adds of the sums.
double update_with_torch_ops(std::vector<ProbeAccumulator*>& active, const torch::Tensor& queries,
                             const torch::Tensor& K, const torch::Tensor& V, int64_t c0, int64_t c1,
                             ProbeProfile& profile) {
  int64_t q_max = 0;
  for (auto* a : active) q_max = std::max(q_max, a->q);
  auto t = std::chrono::steady_clock::now();
  const auto S = queries.slice(0, 0, q_max).mm(K.t());  // (q_max, C) similarities
  profile.similarity += seconds_since(t);
  double work = 0;
  for (auto* a : active) {
    t = std::chrono::steady_clock::now();
    auto W = relative_weights(a->weight, S.slice(0, 0, a->q));  // (q, C)
    if (c0 < a->q) {  // queries j in [c0, min(c1, q)) meet themselves here: that is the signal
      auto idx = torch::arange(c0, std::min(c1, a->q), S.options().dtype(torch::kLong));
      a->signal.index_put_({idx}, W.index({idx, idx - c0}));
      W.index_put_({idx, idx - c0}, 0.0);
    }
    profile.weights += seconds_since(t);
    t = std::chrono::steady_clock::now();
    a->sums.addmm_(W, V);  // (q, d_v) += (q, C) (C, d_v)
    profile.accumulate += seconds_since(t);
    work += static_cast<double>(a->q * (c1 - c0));
  }
  return work;
}

// ISR of the first q stored keys of a store that is built directly (least squares, delta): the
// store module itself computes the weights, in float64.
std::vector<double> direct_isr(const StoreSpec& spec, const torch::Tensor& keys,
                               const torch::Tensor& values, int64_t q) {
  // One thread: BLAS and LAPACK split their sums by the thread count, and the same JSON should
  // come out at any --threads. These stores are small (M up to 8 d_k).
  TorchThreads one(1);
  auto store = make_store(spec, keys.size(1), values.size(1));
  const auto k64 = keys.to(torch::kCPU, torch::kFloat64),
             v64 = values.to(torch::kCPU, torch::kFloat64);
  store->write(k64, v64);
  const int64_t n = std::min(q, keys.size(0));
  auto W = store->recall_weights(k64.slice(0, 0, n));  // (n, M)
  // |v_j| = 1: the values are unit (in float32), as the streamed sums take them
  return to_vector(self_recall_isr(W, v64, torch::ones({n}, v64.options())));
}

}  // namespace

void ProbeConfig::validate() const {
  check_arg(d_k >= 2 && d_k <= 65536, fmt::format("--dk {}: must be in [2, 65536]", d_k));
  check_arg(d_v >= 1 && d_v <= 65536, fmt::format("--dv {}: must be in [1, 65536]", d_v));
  check_arg(queries >= 1, fmt::format("--queries {}: must be >= 1", queries));
  check_arg(trials >= 1, fmt::format("--trials {}: must be >= 1", trials));
  check_arg(std::isfinite(beta) && beta > 0,
            fmt::format("--beta {}: must be finite and > 0", beta));
  check_arg(m_max >= 16, fmt::format("--m-max {}: must be >= 16", m_max));
  check_arg(margin > 1 && std::isfinite(margin), fmt::format("--margin {}: must be > 1", margin));
  for (int64_t M : m) check_arg(M >= 2, fmt::format("--m {}: every M must be >= 2", M));
  check_arg(std::isfinite(ref_len) && ref_len >= 2,
            fmt::format("--ref-len {}: must be >= 2", ref_len));
  check_arg(rule_m_max >= ref_len || rules.empty(),
            fmt::format("--rule-m-max {}: must be >= --ref-len {}", rule_m_max, ref_len));
  check_arg(rule_queries >= 1, fmt::format("--rule-queries {}: must be >= 1", rule_queries));
  check_arg(chunk >= 1, fmt::format("--chunk {}: must be >= 1", chunk));
  for (const auto& s : store_names()) StoreSpec::parse(s, beta);
}

std::vector<std::string> ProbeConfig::store_names() const {
  return stores.empty() ? default_store_names() : stores;
}

std::vector<int64_t> store_grid(const ProbeConfig& config, const std::string& store) {
  if (!config.m.empty()) {
    std::set<int64_t> sorted(config.m.begin(), config.m.end());
    return {sorted.begin(), sorted.end()};
  }
  const StoreSpec spec = StoreSpec::parse(store, config.beta);
  auto theory_rms = [&](int64_t M) {
    auto isr2 = expected_isr2(spec, config.d_k, static_cast<double>(M));
    return isr2 ? std::sqrt(*isr2) : 0.0;
  };
  int64_t start = 16;  // lower for stores already near capacity there, so the crossing is inside
  while (start > 2 && theory_rms(start) > 0.5) start /= 2;
  std::vector<int64_t> grid;
  for (int64_t M = start; M <= config.m_max; M *= 2) {
    grid.push_back(M);
    auto isr2 = expected_isr2(spec, config.d_k, static_cast<double>(M));
    if (isr2 ? std::sqrt(*isr2) >= config.margin : M >= 8 * config.d_k) break;
  }
  return grid;
}

std::vector<int64_t> rule_grid(const ProbeConfig& config) {
  std::vector<int64_t> grid;
  for (double M = std::round(config.ref_len); M <= static_cast<double>(config.rule_m_max); M *= 2)
    grid.push_back(static_cast<int64_t>(M));
  return grid;
}

double estimate_probe_ram(const ProbePlan& plan, std::string* breakdown) {
  const ProbeConfig& config = plan.config;
  const double dkv = static_cast<double>(config.d_k + config.d_v);
  double direct = 0, samples = 0;
  for (size_t s = 0; s < plan.specs.size(); ++s) {
    const auto& grid = plan.grids[s];
    for (int64_t M : grid) samples += static_cast<double>(std::min(config.queries, M));
    if (plan.store_sum[s] < 0) {
      const auto M = static_cast<double>(grid.back());
      const auto n = static_cast<double>(std::min(config.queries, grid.back()));
      // fp32 keys and values, their fp64 copies and the store's, weights and interference
      direct = std::max(direct, 4 * M * dkv + 8 * 3 * M * dkv + 8 * 2 * n * M);
    }
  }
  for (int64_t M : plan.rule_grid)
    samples += static_cast<double>(config.rules.size()) *
               static_cast<double>(std::min(config.rule_queries, M));
  // Per accumulator its sums and signal; the similarities and weights of the first q_max queries
  // for a chunk (the torch-ops path; the fused path needs less), the memory stream's block and a
  // chunk of keys and values.
  const auto chunk = static_cast<double>(config.chunk);
  double q_max = 0, stream = 0;
  for (const auto& a : plan.sums) {
    q_max = std::max(q_max, static_cast<double>(a.queries));
    stream += 4 * static_cast<double>(a.queries) * (static_cast<double>(config.d_v) + 1);
  }
  // blocks of keys and values: the stream's cached one, and the fused path's ring of three
  const auto block = static_cast<double>(MemoryStream::kBlock) * dkv;
  stream += 4 * (2 * q_max * chunk + 4 * block + chunk * dkv);
  samples *= 8 * 2 * static_cast<double>(config.trials);  // per trial, and its accumulator's copy
  if (breakdown)
    *breakdown = fmt::format(
        "{} streamed for {} accumulators, {} for the largest direct store, {} "
        "of ISR samples",
        format_bytes(stream), plan.sums.size(), format_bytes(direct), format_bytes(samples));
  return stream + direct + samples;
}

namespace {

// Per grid point, per trial, the ISR sample of one store.
using TrialSamples = std::vector<std::vector<std::vector<double>>>;

// Streams one trial's memories through the plan's accumulators (the fused path's one region, or
// the torch-ops path's chunks), reading the ISR at every grid point; adds the products' flops to
// result.flops and the work to `done`.
void stream_trial(const ProbePlan& plan, std::vector<ProbeAccumulator>& accs, MemoryStream& stream,
                  const ProgressFn& progress, double& done, ProbeResult& result) {
  const ProbeConfig& config = plan.config;
  const bool fused = fast_kernels(config.device);
  const double total_work = plan.work * static_cast<double>(config.trials);
  ProbeProfile& profile = result.profile;
  const double drawn0 = stream.draw_seconds();
  int64_t q_max = 0;
  for (const auto& a : accs) q_max = std::max(q_max, a.q);
  torch::Tensor queries;  // the first stored keys: (q_max, d_k), transposed on the fused path
  if (q_max > 0) queries = stream.get(0, q_max).first.clone();
  if (fused && q_max > 0) queries = queries.t().contiguous();
  for (auto& a : accs) a.start(config.d_v, config.device);
  if (fused) {
    std::vector<ProbeAccumulator*> all;
    for (auto& a : accs) all.push_back(&a);
    const auto totals =
        stream_fused(all, stream, plan.end_max, q_max > 0 ? queries.data_ptr<float>() : nullptr,
                     q_max > 0 ? queries.size(1) : 0, plan.boundaries, profile, [&](double work) {
                       if (progress) progress(done + work, total_work);
                     });
    result.flops += 2.0 * totals.similarities * static_cast<double>(config.d_k) +
                    2.0 * totals.work * static_cast<double>(config.d_v);
    done += totals.work;
  }
  for (int64_t c0 = 0; !fused && c0 < plan.end_max;) {
    // chunks end at grid points
    const int64_t c1 =
        std::min({*std::upper_bound(plan.boundaries.begin(), plan.boundaries.end(), c0),
                  c0 + config.chunk, plan.end_max});
    auto [K, V] = stream.get(c0, c1);
    std::vector<ProbeAccumulator*> active;
    for (auto& a : accs)
      if (a.end > c0) active.push_back(&a);
    int64_t q_active = 0;  // similarities only for the queries some accumulator still needs
    for (auto* a : active) q_active = std::max(q_active, a->q);
    const double work = update_with_torch_ops(active, queries, K, V, c0, c1, profile);
    auto t = std::chrono::steady_clock::now();
    for (auto* a : active)
      if (a->snapshots.count(c1)) a->snapshot(c1);
    profile.snapshots += seconds_since(t);
    result.flops += 2.0 * static_cast<double>(q_active * (c1 - c0) * config.d_k) +
                    2.0 * work * static_cast<double>(config.d_v);
    done += work;
    if (progress) progress(done, total_work);
    c0 = c1;
  }
  profile.generate += stream.draw_seconds() - drawn0;
}

// This trial's samples: each store's from its accumulator's snapshots (or computed directly for
// the stores that are no weight function, and with config.reference), each rule point's pooled
// over trials.
void collect_trial(const ProbePlan& plan, const std::vector<ProbeAccumulator>& accs,
                   MemoryStream& stream, std::vector<TrialSamples>& store_isr,
                   std::vector<std::vector<std::vector<double>>>& rule_pool,
                   ProbeProfile& profile) {
  const ProbeConfig& config = plan.config;
  for (size_t s = 0; s < plan.specs.size(); ++s) {
    const auto& grid = plan.grids[s];
    store_isr[s].resize(grid.size());
    for (size_t g = 0; g < grid.size(); ++g) {
      std::vector<double> sample;
      if (plan.store_sum[s] >= 0) {
        const auto& full = accs[static_cast<size_t>(plan.store_sum[s])].isr.at(grid[g]);
        sample.assign(full.begin(), full.begin() + std::min<int64_t>(config.queries, grid[g]));
      } else {
        const auto t = std::chrono::steady_clock::now();
        auto [K, V] = stream.get(0, grid[g]);
        sample = direct_isr(plan.specs[s], K, V, config.queries);
        profile.direct += seconds_since(t);
      }
      store_isr[s][g].push_back(std::move(sample));
    }
  }
  for (size_t r = 0; r < config.rules.size(); ++r)
    for (size_t g = 0; g < plan.rule_grid.size(); ++g) {
      const auto& full = accs[static_cast<size_t>(plan.rule_sum[r][g])].isr.at(plan.rule_grid[g]);
      rule_pool[r][g].insert(
          rule_pool[r][g].end(), full.begin(),
          full.begin() + std::min<int64_t>(config.rule_queries, plan.rule_grid[g]));
    }
}

// Store s's curve (pooled over trials, beside theory) and capacity: where the pooled median and
// RMS cross 1, the trials' median crossings as the range, the SEM of the trials' RMS crossings.
StoreResult reduce_store(const ProbePlan& plan, size_t s, const TrialSamples& isr) {
  const ProbeConfig& config = plan.config;
  StoreResult out;
  out.store = plan.specs[s].name();
  const auto& grid = plan.grids[s];
  std::vector<double> pooled_median(grid.size()), pooled_rms(grid.size());
  std::vector<std::vector<double>> trial_median(config.trials, std::vector<double>(grid.size()));
  std::vector<std::vector<double>> trial_rms = trial_median;
  for (size_t g = 0; g < grid.size(); ++g) {
    std::vector<double> pooled;
    for (int64_t t = 0; t < config.trials; ++t) {
      const auto& x = isr[g][t];
      pooled.insert(pooled.end(), x.begin(), x.end());
      const IsrSummary one = summarize(x);
      trial_median[t][g] = one.median;
      trial_rms[t][g] = one.rms;
    }
    CurvePoint p;
    p.M = grid[g];
    p.isr = summarize(std::move(pooled));
    if (auto e = expected_isr2(plan.specs[s], config.d_k, static_cast<double>(grid[g])))
      p.theory_rms = std::sqrt(*e);
    pooled_median[g] = p.isr.median;
    pooled_rms[g] = p.isr.rms;
    out.curve.push_back(p);
  }
  Capacity& cap = out.capacity;
  cap.median = crossing(grid, pooled_median);
  cap.rms = crossing(grid, pooled_rms);
  std::vector<double> rms_caps;
  for (int64_t t = 0; t < config.trials; ++t) {
    if (auto c = crossing(grid, trial_median[t])) {
      cap.low = cap.low ? std::min(*cap.low, *c) : *c;
      cap.high = cap.high ? std::max(*cap.high, *c) : *c;
    }
    if (auto c = crossing(grid, trial_rms[t])) rms_caps.push_back(*c);
  }
  if (rms_caps.size() >= 2 && rms_caps.size() == static_cast<size_t>(config.trials)) {
    double mean = 0, var = 0;
    for (double c : rms_caps) mean += c / static_cast<double>(rms_caps.size());
    for (double c : rms_caps)
      var += (c - mean) * (c - mean) / static_cast<double>(rms_caps.size() - 1);
    cap.rms_sem = std::sqrt(var / static_cast<double>(rms_caps.size()));
  }
  out.capacity.theory = theory_capacity(plan.specs[s], config.d_k);
  return out;
}

// Rule r's curve: the pooled ISR per length beside softmax theory at the rule's beta.
RuleResult reduce_rule(const ProbePlan& plan, size_t r,
                       const std::vector<std::vector<double>>& pool) {
  const ProbeConfig& config = plan.config;
  RuleResult out;
  out.rule = config.rules[r];
  out.ref_len = config.ref_len;
  for (size_t g = 0; g < plan.rule_grid.size(); ++g) {
    RulePoint p;
    p.M = plan.rule_grid[g];
    p.beta = plan.rule_beta[r][g];
    p.isr = summarize(pool[g]);
    p.theory_rms = std::sqrt((static_cast<double>(p.M) - 1) *
                             interference_per_memory(softmax_weight(p.beta), config.d_k));
    out.curve.push_back(p);
  }
  return out;
}

}  // namespace

ProbeResult run_probe(const ProbePlan& plan, const ProgressFn& progress) {
  const ProbeConfig& config = plan.config;
  const auto t0 = std::chrono::steady_clock::now();
  ProbeResult result;
  result.config = config;
  std::vector<ProbeAccumulator> accs(plan.sums.begin(), plan.sums.end());
  double done = 0;
  std::vector<TrialSamples> store_isr(plan.specs.size());
  // per rule, per rule_grid point: the samples of every trial
  std::vector<std::vector<std::vector<double>>> rule_pool(
      config.rules.size(), std::vector<std::vector<double>>(plan.rule_grid.size()));
  for (int64_t trial = 0; trial < config.trials; ++trial) {
    MemoryStream stream(config.seed, trial, config.d_k, config.d_v, config.device);
    stream_trial(plan, accs, stream, progress, done, result);
    collect_trial(plan, accs, stream, store_isr, rule_pool, result.profile);
  }
  for (size_t s = 0; s < plan.specs.size(); ++s)
    result.stores.push_back(reduce_store(plan, s, store_isr[s]));
  for (size_t r = 0; r < config.rules.size(); ++r)
    result.rules.push_back(reduce_rule(plan, r, rule_pool[r]));
  synchronize(config.device);
  result.seconds = seconds_since(t0);
  return result;
}

ProbeResult run_probe(const ProbeConfig& config, const ProgressFn& progress) {
  return run_probe(plan_probe(config), progress);
}

}  // namespace recall
