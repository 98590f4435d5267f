// recall forecast: where a checkpoint's recall fails at longer contexts under each rule, and the
// growth of beta that holds it, read at the training length alone.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "output.h"
#include "recall/analysis/forecast_report.h"
#include "recall/core/error.h"

namespace recall::cli {

void add_forecast(CLI::App& root, Action& action) {
  struct Opts {
    std::string checkpoint, json, target = "64x";
    std::vector<std::string> rules = rule_names(/*learned=*/false);
    ForecastConfig config;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = root.add_subcommand(
      "forecast",
      "an mqar checkpoint's ISR at longer contexts under each rule, and the beta growth that holds "
      "it, from the training length alone");
  cmd->add_option("--checkpoint", o->checkpoint, kCheckpointHelp)->required();
  cmd->add_option("--target", o->target,
                  "forecast to this multiple of the training length, e.g. 256x")
      ->capture_default_str();
  cmd->add_option("--rules", o->rules, "beta rules forecast (the trained rule is always added)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--isr", o->config.level,
                  "prescribe the smallest c of log:c that holds the forecast ISR at or below this "
                  "(accuracy stayed >= 0.95 below about 0.3 on the mqar-store runs)")
      ->capture_default_str();
  cmd->add_option("--accuracy", o->config.accuracy,
                  "prescribe the smallest c of log:c that holds the forecast accuracy at or above "
                  "this (the model's answers with every layer emulating the longer context)")
      ->capture_default_str();
  cmd->add_option("--batches", o->config.batches, "mqar batches read at the training length")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "also write the result as JSON to this file (- : stdout)");
  cmd->callback([o, &action] {
    std::string digits = o->target;
    if (!digits.empty() && digits.back() == 'x') digits.pop_back();
    char* end = nullptr;
    const long long target = std::strtoll(digits.c_str(), &end, 10);
    if (digits.empty() || end != digits.c_str() + digits.size() || target < 2 || target > 4096)
      throw UsageError(fmt::format(
          "--target {}: must be a multiple of the training length from 2x to 4096x, e.g. 256x",
          o->target));
    o->config.target = target;
    o->config.rules = parse_rules("--rules", o->rules);
    o->config.validate();
    check_output("--json", o->json);
    action = [o] {
      Restored restored = restore(o->checkpoint);
      const ForecastReport r = forecast_checkpoint(restored, o->config, o->checkpoint);
      if (!is_stdout(o->json)) std::fputs(forecast_table(r).c_str(), stdout);
      write_output(o->json, forecast_json(r));
      return 0;
    };
  });
}

}  // namespace recall::cli
