#include "recall/extrapolate.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "recall/error.h"
#include "recall/inspect.h"
#include "recall/trainer.h"

namespace recall {

void ExtrapolateConfig::validate() const {
  check_arg(!checkpoints.empty(), "--checkpoints is empty: give run folders or checkpoint files");
  check_arg(!lengths.empty(), "--lengths is empty: give multiples of the training length");
  for (int64_t m : lengths)
    check_arg(m >= 1 && m <= 64, fmt::format("--lengths {}: each must be in [1, 64]", m));
  check_arg(batches >= 1 && batches <= 1000,
            fmt::format("--batches {}: must be in [1, 1000]", batches));
}

std::vector<ExtrapolatePoint> extrapolate(const ExtrapolateConfig& config) {
  config.validate();
  std::vector<ExtrapolatePoint> out;
  for (const std::string& path : config.checkpoints) {
    Restored r = restore(path);
    const ModelConfig& mc = r.config.model;
    for (int64_t m : config.lengths)
      if (mc.pos == PosKind::kLearned && m > 1)
        throw UsageError(
            fmt::format("--lengths {}: checkpoint {} has learned positions for {} "
                        "tokens, only 1 is possible",
                        m, path, mc.seq_len));
    auto task = make_task(r.config, r.vocabulary);
    const BetaRule trained = mc.attn_rule;
    const auto rules = config.rules.empty() ? std::vector<BetaRule>{trained} : config.rules;
    for (BetaRule rule : rules) {
      r.model->set_attn_rule(rule);
      for (int64_t m : config.lengths) {
        const int64_t T = m * mc.seq_len;
        const auto eval =
            evaluate(r.model, *task, length_prompts(*task, r.config, T, config.batches));
        out.push_back({path, trained, rule, m, T, eval.at("accuracy"), eval.at("loss")});
      }
    }
  }
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
                   {"accuracy", p.accuracy},
                   {"loss", p.loss}});
  return nlohmann::json{{"points", out}}.dump(2) + "\n";
}

}  // namespace recall
