// The table and JSON of `recall inspect`.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "recall/analysis/inspect.h"
#include "recall/formats/plot.h"

namespace recall {

namespace {

// The heads of the trained rule at the training length when inspected, else of the first point.
const AttentionReport& base_point(const InspectResult& r) {
  const AttentionReport* base = &r.attention.front();
  for (const auto& a : r.attention)
    if (a.rule == r.model.attn_rule && a.seq_len == r.model.seq_len) base = &a;
  return *base;
}

}  // namespace

std::string inspect_table(const InspectResult& r) {
  const auto& m = r.model;
  std::string out = fmt::format(
      "checkpoint {} (step {}): d_model {}, {} layers x {} heads, ffn {}, trained at seq_len {} "
      "with rule {}\n",
      r.checkpoint, r.step, m.d_model, m.n_layers, m.n_heads,
      m.ffn == FfnKind::kNone ? "none" : feed_forward_name(m.ffn, m.activation), m.seq_len,
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
          "{:>10}  ({})\n",
          f.layer, f.kind, f.keys, f.dim, f.isr.median, f.isr.p10, f.isr.p90, f.recalled,
          f.coherence_mean, f.coherence_max,
          f.theory ? fmt::format("{:.4g}", *f.theory) : std::string("n/a"), f.theory_store);
  }
  if (r.attention.empty()) return out;
  // the lengths in the order inspected (every rule holds the same ones)
  std::vector<int64_t> lengths;
  for (const auto& a : r.attention)
    if (a.rule == r.attention.front().rule) lengths.push_back(a.seq_len);
  out +=
      "\nmqar accuracy (rows: beta rule at evaluation; columns: seq_len, its pairs and "
      "sequences)\n";
  out += fmt::format("{:<6}", "rule");
  for (int64_t T : lengths) out += fmt::format(" {:>8}", T);
  out += fmt::format("\n{:<6}", "pairs");
  for (size_t i = 0; i < lengths.size(); ++i) out += fmt::format(" {:>8}", r.attention[i].pairs);
  out += fmt::format("\n{:<6}", "seqs");
  for (size_t i = 0; i < lengths.size(); ++i) out += fmt::format(" {:>8}", r.attention[i].prompts);
  for (size_t i = 0; i < r.attention.size(); ++i) {
    if (i % lengths.size() == 0) out += fmt::format("\n{:<6}", to_string(r.attention[i].rule));
    out += fmt::format(" {:>8.4f}", r.attention[i].accuracy);
  }
  const AttentionReport* base = &base_point(r);
  out += fmt::format(
      "\n\nheads at seq_len {}, rule {}: read = the position 2i+o a head reads for the pair at "
      "2i\n(key, value, next); ISR = |a_rest|_2 / a_read; * = recalling head (hit >= 0.5); "
      "ablated = accuracy with the head zeroed\n",
      base->seq_len, to_string(base->rule));
  out += fmt::format("{:<6} {:<6} {:>7} {:>6} {:>9} {:>9} {:>8}\n", "head", "read", "weight", "hit",
                     "isr_med", "isr_p90", "ablated");
  static const char* kRead[] = {"key", "value", "next"};
  for (const auto& h : base->heads)
    out += fmt::format("{:<6} {:<6} {:>7.3f} {:>6.3f} {:>9.3g} {:>9.3g} {:>8}\n",
                       fmt::format("L{}H{}{}", h.layer, h.head, h.recalls() ? "*" : ""),
                       kRead[h.offset], h.pair_weight, h.hit_rate, h.isr.median, h.isr.p90,
                       std::isnan(h.ablated_accuracy)  // --no-ablate
                           ? std::string("-")
                           : fmt::format("{:.4f}", h.ablated_accuracy));
  // how the recalling heads' ISR moves with length under each rule
  std::vector<size_t> recalling;
  for (size_t j = 0; j < base->heads.size(); ++j)
    if (base->heads[j].recalls()) recalling.push_back(j);
  if (recalling.empty()) return out;
  out += "\nrecalling heads: median ISR at their read position (columns: seq_len)\n";
  out += fmt::format("{:<6} {:<6}", "rule", "head");
  for (int64_t T : lengths) out += fmt::format(" {:>9}", T);
  for (size_t i = 0; i < r.attention.size(); i += lengths.size())
    for (size_t j : recalling) {
      const auto& h0 = r.attention[i].heads[j];
      out += fmt::format("\n{:<6} {:<6}", to_string(r.attention[i].rule),
                         fmt::format("L{}H{}", h0.layer, h0.head));
      for (size_t k = 0; k < lengths.size(); ++k)
        out += fmt::format(" {:>9.3g}", r.attention[i + k].heads[j].isr.median);
    }
  return out + "\n";
}

void write_inspect_plot(const InspectResult& r, const std::string& path) {
  std::ostringstream data;
  if (r.attention.empty()) {
    // one block: layer  median  p10  p90 of the keys' ISR
    for (const auto& f : r.ffn)
      data << f.layer << ' ' << std::max(f.isr.median, 1e-12) << ' ' << std::max(f.isr.p10, 1e-12)
           << ' ' << std::max(f.isr.p90, 1e-12) << '\n';
    render_plot(
        path, data.str(),
        [&](const std::string& file) {
          return fmt::format(
              "set logscale y\nset grid\nset xlabel 'layer'\nset ylabel 'ISR of its own keys'\n"
              "set title 'feed-forward layers as stores: median ISR, p10 to p90 as bars'\n"
              "set xrange [-0.5:{}]\nset xtics 1\nplot '{}' using 1:2:3:4 with yerrorbars pt 7 "
              "title 'ISR', 1 with lines lc rgb 'black' title 'ISR = 1'\n",
              static_cast<double>(r.ffn.size()) - 0.5, file);
        },
        900, 560);
    return;
  }
  // the recalling heads at the base point; for each rule and length the median of their ISRs
  const AttentionReport& base = base_point(r);
  std::vector<size_t> recalling;
  for (size_t j = 0; j < base.heads.size(); ++j)
    if (base.heads[j].recalls()) recalling.push_back(j);
  std::vector<BetaRule> rules;
  for (const auto& a : r.attention) {
    if (rules.empty() || rules.back() != a.rule) {
      if (!rules.empty()) data << "\n\n";
      rules.push_back(a.rule);
    }
    std::vector<double> isr;
    for (size_t j : recalling) isr.push_back(a.heads[j].isr.median);
    data << a.seq_len << ' ' << a.accuracy << ' '
         << (isr.empty() ? std::string("NaN") : fmt::format("{}", summarize(isr).median)) << '\n';
  }
  render_plot(path, data.str(), [&](const std::string& file) {
    std::string gp = fmt::format(
        "set multiplot layout 1,2\nset logscale x 2\nset grid\nset key top right\n"
        "set xlabel 'sequence length (trained at {})'\n",
        r.model.seq_len);
    auto lines = [&](int column) {
      std::string p;
      for (size_t i = 0; i < rules.size(); ++i)
        p += fmt::format("'{}' index {} using 1:{} with linespoints lc {} pt 7 title '{}'{}", file,
                         i, column, plot_colour(i), to_string(rules[i]),
                         i + 1 < rules.size() ? ", " : "");
      return p;
    };
    gp +=
        "set ylabel 'mqar accuracy'\nset yrange [0:1.02]\n"
        "set title 'accuracy per beta rule at evaluation'\nplot " +
        lines(2) + "\n";
    gp += fmt::format(
        "set ylabel 'median ISR'\nset yrange [*:*]\nset logscale y\n"
        "set title 'recalling heads ({}): median ISR at their read position'\nplot {}, 1 with "
        "lines lc rgb 'black' lw 2 title 'ISR = 1'\nunset multiplot\n",
        recalling.size(), lines(3));
    return gp;
  });
}

std::string inspect_json(const InspectResult& r) {
  using nlohmann::json;
  auto summary = [](const IsrSummary& s) {
    return json{{"median", s.median}, {"mean", s.mean},   {"rms", s.rms},      {"p10", s.p10},
                {"p90", s.p90},       {"count", s.count}, {"unread", s.unread}};
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
                       {"read_offset", h.offset},
                       {"read_weight", h.pair_weight},
                       {"hit_rate", h.hit_rate},
                       {"isr", summary(h.isr)},
                       {"ablated_accuracy", h.ablated_accuracy},
                       {"recalls", h.recalls()}});
    attention.push_back({{"rule", to_string(a.rule)},
                         {"seq_len", a.seq_len},
                         {"pairs", a.pairs},
                         {"prompts", a.prompts},
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
           {"head_read", "position 2i + read_offset for the pair at 2i (0 key, 1 value, 2 next)"},
           {"head_isr", "|a_rest|_2 / a_read"},
           {"ffn", ffn},
           {"attention", attention}};
  return out.dump(2) + "\n";
}

}  // namespace recall
