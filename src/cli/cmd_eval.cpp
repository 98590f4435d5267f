// recall eval: score a checkpoint at any sequence length and under any beta rule (length
// extrapolation: train at L, evaluate at 2L, 4L with su / qwen / yarn / ssmax).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/train/estimates.h"
#include "recall/train/trainer.h"

namespace recall::cli {

void add_eval(CLI::App& root, Action& action) {
  struct Args {
    std::string checkpoint, rule, device = "cpu", precision;
    int64_t seq_len = 0, batches = 0, max_ram = 0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = root.add_subcommand("eval", "score a checkpoint on its task");
  cmd->add_option("--checkpoint", args->checkpoint, kCheckpointHelp)->required();
  cmd->add_option("--seq-len", args->seq_len, "sequence length (default: the training length)")
      ->check(positive());
  cmd->add_option("--rule", args->rule, "attention beta rule: " + beta_rule_names());
  cmd->add_option("--batches", args->batches, "evaluation batches (default: eval_batches)")
      ->check(positive());
  add_device_option(cmd, args->device);
  add_precision_option(cmd, args->precision);
  add_max_ram(cmd, args->max_ram);
  cmd->callback([args, &action] {
    action = [args] {
      const torch::Device device = parse_device(args->device);
      const ScopedPrecision precision(checked_precision(args->precision, device));
      Restored r = restore(args->checkpoint, device);
      const auto& mc = r.config.model;
      const int64_t T = args->seq_len > 0 ? args->seq_len : mc.seq_len;
      if (mc.pos == PosKind::kLearned && T > mc.seq_len)
        throw UsageError(fmt::format("--seq-len {}: this model has learned positions for {} tokens",
                                     T, mc.seq_len));
      if (!args->rule.empty()) r.model->set_attn_rule(parse_rules("--rule", {args->rule}).front());
      const auto& tc = r.config.trainer;
      // a length far past the RAM is refused here, not met with bad_alloc in the forward
      std::string parts;
      check_ram(fmt::format("--seq-len {}", T),
                estimate_eval_ram(r.config, T, tc.batch_size, device, &parts), parts,
                args->max_ram);
      auto task = make_task(r.config, r.vocabulary);
      Rng rng(static_cast<uint64_t>(tc.seed) ^ 0x5bd1e9955bd1e995ULL);  // the training eval set
      const auto set = task->eval_set(args->batches > 0 ? args->batches : tc.eval_batches,
                                      tc.batch_size, T, rng);
      nlohmann::json out{{"checkpoint", args->checkpoint},
                         {"step", r.step},
                         {"task", to_string(r.config.task.kind)},
                         {"seq_len", T},
                         {"rule", args->rule.empty() ? to_string(mc.attn_rule) : args->rule},
                         {"precision", to_string(matmul_precision())}};
      for (const auto& [k, v] : evaluate(r.model, *task, set)) out[k] = v;
      fmt::print("{}\n", out.dump());
      return 0;
    };
  });
}

}  // namespace recall::cli
