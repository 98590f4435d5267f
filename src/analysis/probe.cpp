#include "recall/analysis/probe.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "recall/core/device.h"
#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/core/threads.h"
#include "recall/stores/store.h"
#include "recall/stores/theory.h"

namespace recall {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Seeded stream of unit keys and values. Memories are generated in fixed blocks, each from its own
// generator, so memory i is the same whatever ranges it is read in (grids and chunk sizes differ).
class MemoryStream {
 public:
  MemoryStream(uint64_t seed, int64_t trial, int64_t d_k, int64_t d_v, torch::Device device)
      : seed_(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(trial) + 1))),
        d_k_(d_k),
        d_v_(d_v),
        device_(device) {}

  // Memories [a, b): keys (b - a, d_k), values (b - a, d_v).
  std::pair<torch::Tensor, torch::Tensor> get(int64_t a, int64_t b) {
    std::vector<torch::Tensor> ks, vs;
    for (int64_t i = a; i < b;) {
      const int64_t block = i / kBlock, lo = i - block * kBlock,
                    hi = std::min(b - block * kBlock, kBlock);
      load(block);
      ks.push_back(keys_.slice(0, lo, hi));
      vs.push_back(values_.slice(0, lo, hi));
      i = block * kBlock + hi;
    }
    if (ks.size() == 1) return {ks[0], vs[0]};
    return {torch::cat(ks), torch::cat(vs)};
  }

 private:
  static constexpr int64_t kBlock = 16384;
  void load(int64_t block) {
    if (block == cached_) return;
    // Sub-blocks with their own generators fill in parallel; the result does not depend on threads.
    constexpr int64_t kSub = 2048;
    auto x = torch::empty({kBlock, d_k_ + d_v_});
    const uint64_t base = splitmix64(seed_ + static_cast<uint64_t>(block));
    at::parallel_for(0, kBlock / kSub, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        auto gen =
            at::make_generator<at::CPUGeneratorImpl>(splitmix64(base + static_cast<uint64_t>(i)));
        x.slice(0, i * kSub, (i + 1) * kSub).normal_(0.0, 1.0, gen);
      }
    });
    auto k = x.slice(1, 0, d_k_), v = x.slice(1, d_k_);
    keys_ = (k / k.norm(2, 1, true)).to(device_).contiguous();  // (kBlock, d_k), unit rows
    values_ = (v / v.norm(2, 1, true)).to(device_).contiguous();
    cached_ = block;
  }
  uint64_t seed_;
  int64_t d_k_, d_v_, cached_ = -1;
  torch::Device device_;
  torch::Tensor keys_, values_;
};

std::vector<double> to_vector(const torch::Tensor& t) {
  auto c = t.to(torch::kCPU, torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// sigma(s) / sigma(1), computed so that it stays finite (softmax at large beta).
torch::Tensor relative_weights(const WeightFunction& w, const torch::Tensor& s) {
  if (w.kind == WeightKind::kSoftmax) return torch::exp((s - 1.0) * w.beta);
  const double one = w(1.0);
  if (w.kind == WeightKind::kLinear) return s.clone();
  return one == 1.0 ? w(s) : w(s) / one;
}

// One running sum A_j = sum_{i != j} (sigma(s_ij) / sigma(1)) v_i over the stream, for the first q
// queries, with ISR snapshots at given M.
struct Accumulator {
  WeightFunction weight;
  int64_t q = 0, end = 0;
  std::set<int64_t> snapshots;
  std::map<int64_t, std::vector<double>> isr;  // M -> ISR of the first min(q, M) queries
};

// Accumulators with the same q, ordered by end (latest first): those still active at any point of
// the stream are a prefix, so one GEMM updates all their sums.
struct AccGroup {
  int64_t q = 0;
  std::vector<Accumulator*> accs;
  torch::Tensor sums, signal, wbuf;  // (n q, d_v), (n, q), flat buffer for (n q, chunk) weights

  void start(int64_t d_v, int64_t chunk, const torch::Device& device) {
    const auto n = static_cast<int64_t>(accs.size());
    const auto opts = torch::TensorOptions().device(device);
    sums = torch::zeros({n * q, d_v}, opts);
    signal = torch::zeros({n, q}, opts);
    if (!wbuf.defined()) wbuf = torch::empty({n * q * chunk}, opts);
  }

  // Adds memories [c0, c1) with similarities S (>= q rows, C columns) and values V (C, d_v).
  // Returns the multiply-adds done.
  double update(const torch::Tensor& S, const torch::Tensor& V, int64_t c0, int64_t c1) {
    int64_t k = 0;
    while (k < static_cast<int64_t>(accs.size()) && accs[k]->end > c0) ++k;
    if (k == 0) return 0;
    const int64_t C = c1 - c0;
    auto Sq = S.slice(0, 0, q);
    torch::Tensor shifted;  // S - 1, shared by every softmax accumulator
    auto W = wbuf.narrow(0, 0, k * q * C).view({k * q, C});  // (k q, C)
    for (int64_t i = 0; i < k; ++i) {
      const WeightFunction& w = accs[i]->weight;
      auto dst = W.slice(0, i * q, (i + 1) * q);
      if (w.kind == WeightKind::kSoftmax) {
        if (!shifted.defined()) shifted = Sq - 1.0;
        torch::mul_out(dst, shifted, w.beta).exp_();  // exp(beta (s - 1)) = sigma(s) / sigma(1)
      } else {
        dst.copy_(relative_weights(w, Sq));
      }
      if (c0 < q) {  // queries j in [c0, min(c1, q)) meet themselves here: that is the signal
        auto idx = torch::arange(c0, std::min(c1, q), S.options().dtype(torch::kLong));
        signal[i].index_put_({idx}, dst.index({idx, idx - c0}));
        dst.index_put_({idx, idx - c0}, 0.0);
      }
    }
    sums.slice(0, 0, k * q).addmm_(W, V);  // (k q, d_v) += (k q, C) (C, d_v)
    for (int64_t i = 0; i < k; ++i) {
      if (!accs[i]->snapshots.count(c1)) continue;
      const int64_t n = std::min(q, c1);
      auto isr = sums.slice(0, i * q, i * q + n).norm(2, 1) / signal[i].slice(0, 0, n).abs();
      accs[i]->isr[c1] = to_vector(isr);
    }
    return static_cast<double>(k * q * C);
  }
};

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
  auto idx = torch::arange(n, torch::kLong);
  auto signal = W.index({idx, idx}).abs();
  W.index_put_({idx, idx}, 0.0);
  auto interference = W.mm(v64).norm(2, 1);  // (n,)
  return to_vector(interference / signal);
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

double estimate_probe_memory(const ProbeConfig& config, std::string* breakdown) {
  config.validate();
  const double dkv = static_cast<double>(config.d_k + config.d_v);
  std::map<AccKey, int64_t> accs;  // -> queries
  double direct = 0, samples = 0;
  for (const auto& name : config.store_names()) {
    const StoreSpec spec = StoreSpec::parse(name, config.beta);
    const auto grid = store_grid(config, name);
    for (int64_t M : grid) samples += static_cast<double>(std::min(config.queries, M));
    if (spec.is_weight_function() && !config.reference) {
      accs[key_of(spec.weight, config.queries)] = config.queries;
    } else {
      const auto M = static_cast<double>(grid.back());
      const auto n = static_cast<double>(std::min(config.queries, grid.back()));
      // fp32 keys and values, their fp64 copies and the store's, weights and interference
      direct = std::max(direct, 4 * M * dkv + 8 * 3 * M * dkv + 8 * 2 * n * M);
    }
  }
  for (BetaRule r : config.rules)
    for (int64_t M : rule_grid(config)) {
      accs[key_of(softmax_weight(beta_for(r, M, config.ref_len, config.beta)),
                  config.rule_queries)] = config.rule_queries;
      samples += static_cast<double>(std::min(config.rule_queries, M));
    }
  const auto chunk = static_cast<double>(config.chunk);
  double q_max = 0, stream = 0;
  for (const auto& [key, q] : accs) {
    q_max = std::max(q_max, static_cast<double>(q));
    stream += 4 * static_cast<double>(q) * (static_cast<double>(config.d_v) + 1 + chunk);
  }
  stream += 4 * (q_max * chunk + 16384 * dkv + chunk * dkv);
  samples *= 8 * 2 * static_cast<double>(config.trials);  // per trial, and its accumulator's copy
  if (breakdown)
    *breakdown = fmt::format(
        "{} streamed for {} accumulators, {} for the largest direct store, {} "
        "of ISR samples",
        format_bytes(stream), accs.size(), format_bytes(direct), format_bytes(samples));
  return stream + direct + samples;
}

ProbeResult run_probe(const ProbeConfig& config, const ProgressFn& progress) {
  config.validate();
  const auto t0 = std::chrono::steady_clock::now();
  ProbeResult result;
  result.config = config;

  // Plan: one accumulator per distinct (weight function, queries); stores and rule points read its
  // snapshots.
  std::map<AccKey, Accumulator> plan;
  auto need = [&](const WeightFunction& w, int64_t q, int64_t M) {
    Accumulator& a = plan[key_of(w, q)];
    a.weight = w;
    a.q = q;
    a.end = std::max(a.end, M);
    a.snapshots.insert(M);
  };
  std::vector<StoreSpec> specs;
  for (const auto& name : config.store_names()) {
    specs.push_back(StoreSpec::parse(name, config.beta));
    if (specs.back().is_weight_function() && !config.reference)
      for (int64_t M : store_grid(config, name)) need(specs.back().weight, config.queries, M);
  }
  const auto rgrid = rule_grid(config);
  for (BetaRule r : config.rules)
    for (int64_t M : rgrid)
      need(softmax_weight(beta_for(r, M, config.ref_len, config.beta)), config.rule_queries, M);

  std::set<int64_t> boundaries;
  std::map<int64_t, AccGroup> groups;  // by q
  int64_t q_max = 0, end_max = 0;
  double total_work = 0;
  for (auto& [key, a] : plan) {
    boundaries.insert(a.snapshots.begin(), a.snapshots.end());
    q_max = std::max(q_max, a.q);
    end_max = std::max(end_max, a.end);
    total_work += static_cast<double>(a.q) * a.end;
    groups[a.q].q = a.q;
    groups[a.q].accs.push_back(&a);
  }
  for (auto& [q, g] : groups)
    std::stable_sort(g.accs.begin(), g.accs.end(),
                     [](const Accumulator* x, const Accumulator* y) { return x->end > y->end; });
  total_work *= config.trials;
  double done = 0;

  // Per store: per grid point, per trial, the ISR sample.
  std::vector<std::vector<std::vector<std::vector<double>>>> store_isr(specs.size());
  std::vector<std::vector<std::vector<double>>> rule_pool(
      config.rules.size(), std::vector<std::vector<double>>(rgrid.size()));
  torch::Tensor S_buf =
      torch::empty({q_max * config.chunk}, torch::TensorOptions().device(config.device));
  for (int64_t trial = 0; trial < config.trials; ++trial) {
    MemoryStream stream(config.seed, trial, config.d_k, config.d_v, config.device);
    torch::Tensor queries;
    if (q_max > 0) queries = stream.get(0, q_max).first.clone();  // the first stored keys
    for (auto& [key, a] : plan) a.isr.clear();
    for (auto& [q, g] : groups) g.start(config.d_v, config.chunk, config.device);
    for (int64_t c0 = 0; c0 < end_max;) {
      const int64_t c1 = std::min({*boundaries.upper_bound(c0), c0 + config.chunk, end_max});
      auto [K, V] = stream.get(c0, c1);
      int64_t q_active = 0;  // similarities only for the queries some accumulator still needs
      for (auto& [q, g] : groups)
        if (g.accs.front()->end > c0) q_active = std::max(q_active, q);
      auto S = S_buf.narrow(0, 0, q_active * (c1 - c0)).view({q_active, c1 - c0});
      torch::mm_out(S, queries.slice(0, 0, q_active), K.t());  // (q_active, C) similarities
      result.flops += 2.0 * q_active * (c1 - c0) * config.d_k;
      for (auto& [q, g] : groups) {
        const double work = g.update(S, V, c0, c1);
        result.flops += 2.0 * work * config.d_v;
        done += work;
      }
      if (progress) progress(done, total_work);
      c0 = c1;
    }
    // Collect this trial's samples.
    for (size_t s = 0; s < specs.size(); ++s) {
      const auto grid = store_grid(config, config.store_names()[s]);
      store_isr[s].resize(grid.size());
      for (size_t g = 0; g < grid.size(); ++g) {
        std::vector<double> sample;
        if (specs[s].is_weight_function() && !config.reference) {
          const auto& full = plan.at(key_of(specs[s].weight, config.queries)).isr.at(grid[g]);
          sample.assign(full.begin(), full.begin() + std::min<int64_t>(config.queries, grid[g]));
        } else {
          auto [K, V] = stream.get(0, grid[g]);
          sample = direct_isr(specs[s], K, V, config.queries);
        }
        store_isr[s][g].push_back(std::move(sample));
      }
    }
    for (size_t r = 0; r < config.rules.size(); ++r)
      for (size_t g = 0; g < rgrid.size(); ++g) {
        const double b = beta_for(config.rules[r], rgrid[g], config.ref_len, config.beta);
        const auto& full = plan.at(key_of(softmax_weight(b), config.rule_queries)).isr.at(rgrid[g]);
        rule_pool[r][g].insert(rule_pool[r][g].end(), full.begin(),
                               full.begin() + std::min<int64_t>(config.rule_queries, rgrid[g]));
      }
  }

  // Summaries, capacities and theory.
  for (size_t s = 0; s < specs.size(); ++s) {
    StoreResult out;
    out.store = specs[s].name();
    const auto grid = store_grid(config, config.store_names()[s]);
    std::vector<double> pooled_median(grid.size()), pooled_rms(grid.size());
    std::vector<std::vector<double>> trial_median(config.trials, std::vector<double>(grid.size()));
    std::vector<std::vector<double>> trial_rms = trial_median;
    for (size_t g = 0; g < grid.size(); ++g) {
      std::vector<double> pooled;
      for (int64_t t = 0; t < config.trials; ++t) {
        const auto& x = store_isr[s][g][t];
        pooled.insert(pooled.end(), x.begin(), x.end());
        const IsrSummary one = summarize(x);
        trial_median[t][g] = one.median;
        trial_rms[t][g] = one.rms;
      }
      CurvePoint p;
      p.M = grid[g];
      p.isr = summarize(std::move(pooled));
      if (auto e = expected_isr2(specs[s], config.d_k, static_cast<double>(grid[g])))
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
    out.capacity.theory = theory_capacity(specs[s], config.d_k);
    result.stores.push_back(std::move(out));
  }
  for (size_t r = 0; r < config.rules.size(); ++r) {
    RuleResult out;
    out.rule = config.rules[r];
    out.ref_len = config.ref_len;
    for (size_t g = 0; g < rgrid.size(); ++g) {
      RulePoint p;
      p.M = rgrid[g];
      p.beta = beta_for(out.rule, rgrid[g], config.ref_len, config.beta);
      p.isr = summarize(rule_pool[r][g]);
      p.theory_rms = std::sqrt((static_cast<double>(p.M) - 1) *
                               interference_per_memory(softmax_weight(p.beta), config.d_k));
      out.curve.push_back(p);
    }
    result.rules.push_back(std::move(out));
  }
  synchronize(config.device);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace recall
