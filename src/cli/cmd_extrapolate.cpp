// recall extrapolate: accuracy of checkpoints at 1x .. 16x their training length, per beta rule.
#include <fmt/format.h>

#include <cstdio>

#include "commands.h"
#include "recall/error.h"
#include "recall/extrapolate.h"
#include "recall/io.h"

namespace recall::cli {

void add_extrapolate(CLI::App& root, Action& action) {
  struct Opts {
    std::string json;
    std::vector<std::string> rules;
    ExtrapolateConfig config;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      root.add_subcommand("extrapolate", "accuracy of checkpoints at multiples of their length");
  cmd->add_option("--checkpoints", o->config.checkpoints, "run folders or checkpoint files")
      ->delimiter(',')
      ->required();
  cmd->add_option("--lengths", o->config.lengths, "multiples of the training length")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--rules", o->rules, "beta rules at evaluation (default: each trained rule)")
      ->delimiter(',');
  cmd->add_option("--batches", o->config.batches, "evaluation batches per point")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "also write the result as JSON to this file");
  cmd->callback([o, &action] {
    for (const auto& name : o->rules) {
      try {
        o->config.rules.push_back(beta_rule_from_string(name));
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--rules: {}", e.what()));
      }
    }
    o->config.validate();
    if (!o->json.empty()) check_output_path("--json", o->json);
    action = [o] {
      const auto points = extrapolate(o->config);
      std::fputs(extrapolate_table(points).c_str(), stdout);
      if (!o->json.empty()) write_file_atomic(o->json, extrapolate_json(points));
      return 0;
    };
  });
}

}  // namespace recall::cli
