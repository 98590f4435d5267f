// The table and JSON of `recall inspect`.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "recall/inspect.h"

namespace recall {

std::string inspect_table(const InspectResult& r) {
  const auto& m = r.model;
  std::string out = fmt::format(
      "checkpoint {} (step {}): d_model {}, {} layers x {} heads, ffn {}, trained at seq_len {} "
      "with rule {}\n",
      r.checkpoint, r.step, m.d_model, m.n_layers, m.n_heads, to_string(m.ffn), m.seq_len,
      to_string(m.attn_rule));
  if (!r.ffn.empty()) {
    out +=
        "\nfeed-forward layers as stores: key j queried as sqrt(d) k_j/|k_j| through the layer\n";
    out += fmt::format("{:>5} {:<12} {:>6} {:>5} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>10}  {}\n",
                       "layer", "kind", "keys", "d", "isr_med", "isr_p10", "isr_p90", "isr<1",
                       "coh_mean", "coh_max", "theory_cap", "(theory store)");
    for (const auto& f : r.ffn)
      out += fmt::format(
          "{:>5} {:<12} {:>6} {:>5} {:>9.4g} {:>9.4g} {:>9.4g} {:>8.3f} {:>8.3f} {:>8.3f} "
          "{:>10.4g}  "
          "({})\n",
          f.layer, f.kind, f.keys, f.dim, f.isr.median, f.isr.p10, f.isr.p90, f.recalled,
          f.coherence_mean, f.coherence_max, f.theory.value_or(0.0), f.theory_store);
  }
  if (r.attention.empty()) return out;
  out +=
      "\nattention heads on mqar prompts: per head pair weight / hit rate / median ISR "
      "(ISR = |a_rest|_2 / a_pair; * = recalling head, hit rate >= 0.5)\n";
  out += fmt::format("{:<6} {:>7} {:>8}", "rule", "seq_len", "accuracy");
  for (const auto& h : r.attention.front().heads)
    out += fmt::format("  {:>19}", fmt::format("L{}H{}", h.layer, h.head));
  out += "\n";
  for (const auto& a : r.attention) {
    out += fmt::format("{:<6} {:>7} {:>8.4f}", to_string(a.rule), a.seq_len, a.accuracy);
    for (const auto& h : a.heads)
      out +=
          fmt::format("  {:>19}", fmt::format("{:.2f}/{:.2f}/{:.3g}{}", h.pair_weight, h.hit_rate,
                                              h.isr.median, h.recalls() ? "*" : " "));
    out += "\n";
  }
  return out;
}

std::string inspect_json(const InspectResult& r) {
  using nlohmann::json;
  auto summary = [](const IsrSummary& s) {
    return json{{"median", s.median}, {"mean", s.mean}, {"rms", s.rms},
                {"p10", s.p10},       {"p90", s.p90},   {"count", s.count}};
  };
  json ffn = json::array();
  for (const auto& f : r.ffn)
    ffn.push_back({{"layer", f.layer},
                   {"kind", f.kind},
                   {"keys", f.keys},
                   {"dim", f.dim},
                   {"isr", summary(f.isr)},
                   {"recalled", f.recalled},
                   {"coherence_mean", f.coherence_mean},
                   {"coherence_max", f.coherence_max},
                   {"theory_capacity", f.theory ? json(*f.theory) : json(nullptr)},
                   {"theory_store", f.theory_store}});
  json attention = json::array();
  for (const auto& a : r.attention) {
    json heads = json::array();
    for (const auto& h : a.heads)
      heads.push_back({{"layer", h.layer},
                       {"head", h.head},
                       {"pair_weight", h.pair_weight},
                       {"hit_rate", h.hit_rate},
                       {"isr", summary(h.isr)},
                       {"recalls", h.recalls()}});
    attention.push_back({{"rule", to_string(a.rule)},
                         {"seq_len", a.seq_len},
                         {"accuracy", a.accuracy},
                         {"heads", heads}});
  }
  json out{{"checkpoint", r.checkpoint},
           {"step", r.step},
           {"model",
            {{"d_model", r.model.d_model},
             {"n_layers", r.model.n_layers},
             {"n_heads", r.model.n_heads},
             {"ffn", to_string(r.model.ffn)},
             {"seq_len", r.model.seq_len},
             {"attn_rule", to_string(r.model.attn_rule)}}},
           {"ffn_query", "sqrt(d) k_j / |k_j|"},
           {"head_isr", "|a_rest|_2 / (a_key + a_value of the matching pair)"},
           {"ffn", ffn},
           {"attention", attention}};
  return out.dump(2) + "\n";
}

}  // namespace recall
