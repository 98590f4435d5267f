#include "recall/analysis/inspect.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "recall/core/error.h"

namespace recall {

void InspectConfig::validate() const {
  check_length_multiples(lengths);
  check_arg(!rules.empty(), "--rules is empty: give some of none, su, qwen, yarn, ssmax");
  check_arg(batches >= 1 && batches <= 1000,
            fmt::format("--batches {}: must be in [1, 1000]", batches));
}

InspectResult inspect(Restored& restored, const InspectConfig& config,
                      const std::string& checkpoint) {
  config.validate();
  const TrainConfig& tc = restored.config;
  const ModelConfig& mc = tc.model;
  for (int64_t m : config.lengths)
    if (mc.pos == PosKind::kLearned && m > 1)
      throw UsageError(fmt::format(
          "--lengths {}: this model has learned positions for {} tokens, only 1 is possible", m,
          mc.seq_len));
  if (tc.task.kind == TaskKind::kMqar)
    check_length_ram(tc, config.lengths, restored.model->parameters().front().device(),
                     config.max_ram, /*all_weights=*/true);
  InspectResult out{checkpoint, restored.step, mc, {}, {}};
  Transformer& model = restored.model;
  for (int64_t l = 0; l < mc.n_layers; ++l)
    if (const auto ffn = model->block(l)->ffn)
      out.ffn.push_back(inspect_feed_forward(ffn.ptr(), l));
  if (tc.task.kind != TaskKind::kMqar) return out;
  auto task = make_task(tc, restored.vocabulary);
  const BetaRule trained = mc.attn_rule;
  for (BetaRule rule : config.rules) {
    model->set_attn_rule(rule);
    for (int64_t m : config.lengths) {
      const int64_t T = m * mc.seq_len;
      const int64_t pairs = mqar_pairs_at(tc, m, config.pairs);
      const auto set = length_prompts(
          *task, tc, T, config.batches, pairs,
          std::max(kInspectMinSequences, config.batches * tc.trainer.batch_size / m));
      int64_t prompts = 0;
      for (const Batch& b : set) prompts += b.x.size(0);
      auto heads = inspect_heads(model, set, pairs);
      if (config.ablate)
        ablate_heads(model, *task, set, heads);
      else
        for (auto& h : heads) h.ablated_accuracy = std::numeric_limits<double>::quiet_NaN();
      out.attention.push_back(
          {T, pairs, rule, evaluate(model, *task, set).at("accuracy"), prompts, heads});
    }
  }
  model->set_attn_rule(trained);
  return out;
}

}  // namespace recall
