#include "recall/analysis/probe_output.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "recall/stores/theory.h"

namespace recall {

namespace {
using nlohmann::json;

json opt(const std::optional<double>& x) {
  return x ? json(*x) : json(nullptr);
}

json summary_json(const IsrSummary& s) {
  return {{"isr_median", s.median}, {"isr_mean", s.mean}, {"isr_rms", s.rms},
          {"isr_p10", s.p10},       {"isr_p90", s.p90},   {"count", s.count}};
}

std::string fmt_opt(const std::optional<double>& x, const char* spec = "{:.4g}") {
  return x ? fmt::format(fmt::runtime(spec), *x) : std::string("-");
}
}  // namespace

std::string probe_json(const ProbeResult& r) {
  const auto& c = r.config;
  json rules = json::array();
  for (BetaRule b : c.rules) rules.push_back(to_string(b));
  json out;
  out["config"] = {{"stores", c.store_names()},
                   {"d_k", c.d_k},
                   {"d_v", c.d_v},
                   {"queries", c.queries},
                   {"trials", c.trials},
                   {"seed", c.seed},
                   {"beta", c.beta},
                   {"m", c.m},
                   {"m_max", c.m_max},
                   {"margin", c.margin},
                   {"rules", rules},
                   {"ref_len", c.ref_len},
                   {"rule_m_max", c.rule_m_max},
                   {"rule_queries", c.rule_queries}};
  out["stores"] = json::array();
  for (const auto& s : r.stores) {
    json curve = json::array();
    for (const auto& p : s.curve) {
      json pt = summary_json(p.isr);
      pt["M"] = p.M;
      pt["theory_rms"] = opt(p.theory_rms);
      curve.push_back(pt);
    }
    out["stores"].push_back({{"store", s.store},
                             {"curve", curve},
                             {"capacity",
                              {{"median", opt(s.capacity.median)},
                               {"low", opt(s.capacity.low)},
                               {"high", opt(s.capacity.high)},
                               {"rms", opt(s.capacity.rms)},
                               {"rms_sem", opt(s.capacity.rms_sem)},
                               {"theory", opt(s.capacity.theory)}}}});
  }
  out["rules"] = json::array();
  for (const auto& rr : r.rules) {
    json curve = json::array();
    for (const auto& p : rr.curve) {
      json pt = summary_json(p.isr);
      pt["M"] = p.M;
      pt["beta"] = p.beta;
      pt["theory_rms"] = p.theory_rms;
      curve.push_back(pt);
    }
    out["rules"].push_back(
        {{"rule", to_string(rr.rule)}, {"ref_len", rr.ref_len}, {"curve", curve}});
  }
  return out.dump(1) + "\n";
}

std::string probe_csv(const ProbeResult& r) {
  std::string out = "kind,name,M,beta,isr_median,isr_mean,isr_rms,isr_p10,isr_p90,theory_rms\n";
  auto row = [&](const char* kind, const std::string& name, int64_t M, const std::string& beta,
                 const IsrSummary& s, const std::string& theory) {
    out += fmt::format("{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{}\n", kind, name, M, beta,
                       s.median, s.mean, s.rms, s.p10, s.p90, theory);
  };
  for (const auto& s : r.stores)
    for (const auto& p : s.curve)
      row("store", s.store, p.M, "", p.isr,
          p.theory_rms ? fmt::format("{:.9g}", *p.theory_rms) : "");
  for (const auto& rr : r.rules)
    for (const auto& p : rr.curve)
      row("rule", to_string(rr.rule), p.M, fmt::format("{:.9g}", p.beta), p.isr,
          fmt::format("{:.9g}", p.theory_rms));
  return out;
}

std::string probe_table(const ProbeResult& r) {
  std::string out;
  out += fmt::format(
      "capacity (M where the median ISR crosses 1), d_k = {}, beta = {}, {} trials x {} queries\n",
      r.config.d_k, r.config.beta, r.config.trials, r.config.queries);
  out += fmt::format("{:<15}{:>12}{:>12}{:>12}{:>22}{:>12}{:>8}\n", "store", "median", "low",
                     "high", "rms +- sem", "theory", "rms/th");
  for (const auto& s : r.stores) {
    const auto& c = s.capacity;
    std::string rms =
        fmt_opt(c.rms, "{:.5g}") + (c.rms_sem ? fmt::format(" +- {:.2g}", *c.rms_sem) : "");
    std::string ratio = c.rms && c.theory ? fmt::format("{:.3f}", *c.rms / *c.theory) : "-";
    out += fmt::format("{:<15}{:>12}{:>12}{:>12}{:>22}{:>12}{:>8}\n", s.store,
                       fmt_opt(c.median, "{:.5g}"), fmt_opt(c.low, "{:.5g}"),
                       fmt_opt(c.high, "{:.5g}"), rms, fmt_opt(c.theory, "{:.5g}"), ratio);
  }
  out += "\nISR median (theory rms) by M\n";
  for (const auto& s : r.stores) {
    out += fmt::format("{:<15}", s.store);
    for (const auto& p : s.curve)
      out += fmt::format(" {}:{:.3g}({})", p.M, p.isr.median, fmt_opt(p.theory_rms, "{:.3g}"));
    out += "\n";
  }
  if (!r.rules.empty()) {
    out += fmt::format("\nsoftmax ISR median by rule, L = {}, beta_0 = {}\n{:>10}",
                       r.config.ref_len, r.config.beta, "M");
    for (const auto& rr : r.rules) out += fmt::format("{:>22}", to_string(rr.rule) + " (beta)");
    out += "\n";
    for (size_t g = 0; g < r.rules[0].curve.size(); ++g) {
      out += fmt::format("{:>10}", r.rules[0].curve[g].M);
      for (const auto& rr : r.rules)
        out += fmt::format("{:>14.4g} ({:5.2f})", rr.curve[g].isr.median, rr.curve[g].beta);
      out += "\n";
    }
  }
  out += fmt::format("\n{:.1f} s, {:.1f} GFLOP/s\n", r.seconds, r.flops / r.seconds / 1e9);
  return out;
}

std::string theory_table(int64_t d_k, double beta) {
  std::string out =
      fmt::format("theory capacity (M where E[ISR^2] = 1), d_k = {}, beta = {}\n", d_k, beta);
  out += fmt::format("{:<15}{:>16}{:>20}\n", "store", "sphere (exact)", "gaussian shortcut");
  for (const auto& name : default_store_names()) {
    auto spec = StoreSpec::parse(name, beta);
    out += fmt::format("{:<15}{:>16}{:>20}\n", name, fmt_opt(theory_capacity(spec, d_k), "{:.6g}"),
                       fmt_opt(theory_capacity(spec, d_k, KeyLaw::kGaussian), "{:.6g}"));
  }
  return out;
}

std::string theory_json(int64_t d_k, double beta) {
  json stores = json::array();
  for (const auto& name : default_store_names()) {
    auto spec = StoreSpec::parse(name, beta);
    stores.push_back({{"store", name},
                      {"capacity", opt(theory_capacity(spec, d_k))},
                      {"capacity_gaussian", opt(theory_capacity(spec, d_k, KeyLaw::kGaussian))}});
  }
  return json{{"d_k", d_k}, {"beta", beta}, {"stores", stores}}.dump(1) + "\n";
}

}  // namespace recall
