#include "recall/analysis/extrapolate.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "recall/analysis/inspect.h"
#include "recall/core/error.h"
#include "recall/core/signals.h"
#include "recall/formats/plot.h"
#include "recall/train/trainer.h"

namespace recall {

namespace fs = std::filesystem;

void ExtrapolateConfig::validate() const {
  check_length_multiples(lengths);
  check_arg(batches >= 1 && batches <= 1000,
            fmt::format("--batches {}: must be in [1, 1000]", batches));
}

std::vector<ExtrapolatePoint> extrapolate(const ExtrapolateConfig& config) {
  config.validate();
  std::vector<ExtrapolatePoint> out;
  for (const std::string& path : config.checkpoints) {
    Restored r = restore(path, config.device);
    const ModelConfig& mc = r.config.model;
    for (int64_t m : config.lengths)
      if (mc.pos == PosKind::kLearned && m > 1)
        throw UsageError(
            fmt::format("--lengths {}: checkpoint {} has learned positions for {} "
                        "tokens, only 1 is possible",
                        m, path, mc.seq_len));
    check_length_ram(r.config, config.lengths, config.device, config.max_ram, false);
    auto task = make_task(r.config, r.vocabulary);
    const BetaRule trained = mc.attn_rule;
    auto rules = config.rules.empty() ? std::vector<BetaRule>{trained} : config.rules;
    if (trained == BetaRule::kNone)
      rules.insert(rules.end(), config.none_also.begin(), config.none_also.end());
    for (BetaRule rule : rules) {
      r.model->set_attn_rule(rule);
      for (int64_t m : config.lengths) {
        const int64_t T = m * mc.seq_len, pairs = mqar_pairs_at(r.config, m, config.pairs);
        // as many scored queries at every length: with the pairs grown g times, 1/g of the prompts
        const int64_t sequences = config.batches * r.config.trainer.batch_size;
        const int64_t grown = pairs / std::max<int64_t>(1, r.config.task.mqar_pairs);
        const auto eval =
            evaluate(r.model, *task,
                     length_prompts(
                         *task, r.config, T, config.batches, pairs,
                         std::max(kInspectMinSequences, sequences / std::max<int64_t>(1, grown))));
        out.push_back({path, trained, rule, m, T, pairs, eval.at("accuracy"), eval.at("loss")});
      }
    }
  }
  return out;
}

std::vector<std::string> unlearned_runs(const std::vector<ExtrapolatePoint>& points,
                                        double learned) {
  std::vector<std::string> out;
  for (const auto& p : points)
    if (p.multiple == 1 && p.rule == p.trained && p.accuracy < learned &&
        std::find(out.begin(), out.end(), p.checkpoint) == out.end())
      out.push_back(p.checkpoint);
  return out;
}

std::vector<ExtrapolatePoint> learned_points(const std::vector<ExtrapolatePoint>& points,
                                             const std::vector<std::string>& unlearned) {
  std::vector<ExtrapolatePoint> out;
  for (const auto& p : points)
    if (std::find(unlearned.begin(), unlearned.end(), p.checkpoint) == unlearned.end())
      out.push_back(p);
  return out;
}

std::string first_learned_run(const std::vector<ExtrapolatePoint>& points, BetaRule trained,
                              double learned) {
  for (const auto& p : points)
    if (p.multiple == 1 && p.trained == trained && p.rule == trained && p.accuracy >= learned)
      return p.checkpoint;
  return "";
}

std::vector<ExtrapolateCurve> extrapolate_curves(const std::vector<ExtrapolatePoint>& points) {
  std::vector<ExtrapolateCurve> out;
  for (const auto& p : points) {
    auto c = std::find_if(out.begin(), out.end(), [&](const ExtrapolateCurve& c) {
      return c.trained == p.trained && c.rule == p.rule;
    });
    if (c == out.end()) {
      out.push_back({p.trained, p.rule, 0, {}, {}, {}, {}, {}});
      c = out.end() - 1;
    }
    auto m = std::find(c->multiples.begin(), c->multiples.end(), p.multiple);
    const size_t i = static_cast<size_t>(m - c->multiples.begin());
    if (m == c->multiples.end()) {
      c->multiples.push_back(p.multiple);
      c->pairs.push_back(p.pairs);
      c->accuracy.push_back(0);
      c->low.push_back(p.accuracy);
      c->high.push_back(p.accuracy);
    }
    c->accuracy[i] += p.accuracy;  // a sum until divided below
    c->low[i] = std::min(c->low[i], p.accuracy);
    c->high[i] = std::max(c->high[i], p.accuracy);
    if (i == 0) ++c->runs;
  }
  for (auto& c : out)
    for (double& a : c.accuracy) a /= static_cast<double>(c.runs);
  return out;
}

// One row per (checkpoint, rule), one column per multiple: every group holds the same lengths.
std::string extrapolate_table(const std::vector<ExtrapolatePoint>& points) {
  std::string out = fmt::format("{:<32} {:<8} {:<6}", "accuracy: checkpoint", "trained", "rule");
  for (const auto& p : points) {
    if (p.checkpoint != points.front().checkpoint || p.rule != points.front().rule) break;
    out += fmt::format(" {:>8}", fmt::format("{}x", p.multiple));
  }
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    if (i == 0 || points[i - 1].checkpoint != p.checkpoint || points[i - 1].rule != p.rule)
      out += fmt::format("\n{:<32} {:<8} {:<6}", p.checkpoint, to_string(p.trained),
                         to_string(p.rule));
    out += fmt::format(" {:>8.4f}", p.accuracy);
  }
  return out + "\n";
}

std::string extrapolate_json(const std::vector<ExtrapolatePoint>& points) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : points)
    out.push_back({{"checkpoint", p.checkpoint},
                   {"trained_rule", to_string(p.trained)},
                   {"rule", to_string(p.rule)},
                   {"multiple", p.multiple},
                   {"seq_len", p.seq_len},
                   {"pairs", p.pairs},
                   {"accuracy", p.accuracy},
                   {"loss", p.loss}});
  return nlohmann::json{{"points", out}}.dump(2) + "\n";
}

std::vector<ExtrapolatePoint> read_extrapolate_json(const std::string& text,
                                                    const std::string& source) {
  std::vector<ExtrapolatePoint> out;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);  // alive through the loop
    for (const auto& p : j.at("points"))
      out.push_back({p.at("checkpoint").get<std::string>(),
                     beta_rule_from_string(p.at("trained_rule").get<std::string>()),
                     beta_rule_from_string(p.at("rule").get<std::string>()),
                     p.at("multiple").get<int64_t>(), p.at("seq_len").get<int64_t>(),
                     p.at("pairs").get<int64_t>(), p.at("accuracy").get<double>(),
                     p.at("loss").get<double>()});
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(
        fmt::format("{}: not the points of recall extrapolate --json ({})", source, e.what()));
  }
  return out;
}

void write_extrapolate_plot(const std::vector<ExtrapolatePoint>& points, const std::string& path,
                            bool memories) {
  const auto curves = extrapolate_curves(points);
  std::ostringstream data;  // one block per curve: multiple (or pairs)  mean  low  high
  for (const auto& c : curves) {
    for (size_t i = 0; i < c.multiples.size(); ++i)
      data << (memories ? c.pairs[i] : c.multiples[i]) << ' ' << c.accuracy[i] << ' ' << c.low[i]
           << ' ' << c.high[i] << '\n';
    data << "\n\n";
  }
  render_plot(
      path, data.str(),
      [&](const std::string& file) {
        std::string gp =
            "set logscale x 2\nset grid\nset key outside right\nset yrange [0:1.02]\n"
            "set ylabel 'mqar accuracy'\nset title 'recall at longer contexts, per beta rule (mean "
            "over runs, range as bars)'\nplot ";
        gp.insert(0, memories ? "set xlabel 'memories in context (key-value pairs)'\n"
                              : "set xlabel 'sequence length / training length'\n");
        for (size_t i = 0; i < curves.size(); ++i) {
          const auto& c = curves[i];
          const std::string name = c.trained == c.rule
                                       ? to_string(c.rule)
                                       : fmt::format("trained {}, evaluated {}",
                                                     to_string(c.trained), to_string(c.rule));
          gp += fmt::format(
              "'{0}' index {1} using 1:2 with linespoints lc {2} pt 7 title '{3}', "
              "'{0}' index {1} using 1:2:3:4 with yerrorbars lc {2} pt 7 notitle{4}",
              file, i, plot_colour(i), name, i + 1 < curves.size() ? ", " : "\n");
        }
        return gp;
      },
      1100, 640);
}

}  // namespace recall
