// Each subcommand lives in its own file and registers itself here. add_X(root, action) adds the
// subcommand and, when it is chosen, stores in `action` the work to run after parsing
// (recall/cli/app.h).
#pragma once
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "recall/cli/app.h"
#include "recall/core/device.h"
#include "recall/core/error.h"
#include "recall/ops/precision.h"
#include "recall/stores/beta_rule.h"

namespace recall {
struct ProbeConfig;
}

namespace recall::cli {

// Adds --device (cpu, the default, cuda or cuda:N) to `cmd`, bound to `device`; the action turns it
// into a torch::Device with parse_device (recall/core/device.h), which refuses what is not here.
inline CLI::Option* add_device_option(CLI::App* cmd, std::string& device) {
  return cmd->add_option("--device", device, "where to compute: cpu, cuda or cuda:N")
      ->capture_default_str();
}

// What --checkpoint takes, in every command that reads one (restore() in recall/train/trainer.h).
inline constexpr const char* kCheckpointHelp =
    "run folder (its last checkpoint) or checkpoint file (RUN/best.bin: lowest validation loss)";

// For commands that train (train, extrapolate, report, sweep). Runs `work` with the stop signals
// installed (recall/core/signals.h): the first SIGINT or SIGTERM ends each training run after a
// checkpoint, a second ends the process at once. Work made of several runs gives each run
// stop_on_signal() as its TrainOptions::stop and throws StopRequested when one was stopped; this
// prints "stopped by signal N ...; <resume>" and returns 128 + N.
int run_stoppable(const std::function<int()>& work, const std::string& resume);
// The TrainOptions::stop of a run under run_stoppable: the signal received, or 0.
std::function<int(int64_t)> stop_on_signal();

// --max-memory SIZE (512M, 4G ...) into `bytes`: the limit that the command's RAM estimate
// must stay under, instead of what the machine has free (recall/core/machine.h check_ram).
void add_max_ram(CLI::App* cmd, int64_t& bytes);

// --precision fp32|bf16 into `precision` ("" when not given): the matrix products' precision
// (recall/ops/precision.h).
void add_precision_option(CLI::App* cmd, std::string& precision);
// The precision a command runs under, checked for `device` (exit 2 with one line when bf16 cannot
// run here); fp32 when `precision` is "".
Precision checked_precision(const std::string& precision, const torch::Device& device);

void add_theory(CLI::App& root, Action& action);
void add_probe(CLI::App& root, Action& action);
// The probe's flags on `cmd`, bound to `c` (probe and bench probe), and the rules and device they
// name, resolved into `c` and validated (cmd_probe.cpp).
void add_probe_flags(CLI::App* cmd, ProbeConfig& c, std::vector<std::string>& rules, bool& no_rules,
                     std::string& device);
void resolve_rules(ProbeConfig& c, const std::vector<std::string>& rules, bool no_rules,
                   const std::string& device);
// `recall bench` and its `probe` (cmd_bench.cpp).
void add_bench(CLI::App& root, Action& action);
// Adds `train` under the `bench` subcommand (recall/experiments/bench_train.h).
void add_bench_train(CLI::App& bench, Action& action);
// Adds `eval` under the `bench` subcommand: scoring long prompts (cmd_bench_eval.cpp).
void add_bench_eval(CLI::App& bench, Action& action);
void add_train(CLI::App& root, Action& action);
void add_eval(CLI::App& root, Action& action);
void add_sample(CLI::App& root, Action& action);
void add_fit(CLI::App& root, Action& action);
void add_inspect(CLI::App& root, Action& action);
void add_extrapolate(CLI::App& root, Action& action);
void add_forecast(CLI::App& root, Action& action);
void add_experiment(CLI::App& root, Action& action);
void add_report(CLI::App& root, Action& action);
void add_export(CLI::App& root, Action& action);
void add_import(CLI::App& root, Action& action);
void add_sweep(CLI::App& root, Action& action);
void add_plot(CLI::App& root, Action& action);

// A number check for a flag: finite and in [lo, hi] (CLI11's Range lets nan through, and its
// NonNegativeNumber names DBL_MAX, 300 digits, as its bound). `bounds` is how the error says it.
inline CLI::Validator number_in(double lo, double hi, const std::string& bounds) {
  return CLI::Validator(
      [lo, hi, bounds](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v) || v < lo || v > hi)
          return text + ": must be a number " + bounds;
        return "";
      },
      bounds);
}
// The names of the table's rules (recall/stores/beta_rule.h) that take no coefficient, the learned
// ones only where the command has a model that learned them.
inline std::vector<std::string> rule_names(bool learned) {
  std::vector<std::string> out;
  for (BetaRule r : all_beta_rules())
    if (learned || !row_of(r).learns) out.push_back(to_string(r));
  return out;
}

// The rules a flag names ("none,su,log:0.4"); a UsageError names the flag and the bad value.
inline std::vector<BetaRule> parse_rules(const std::string& flag,
                                         const std::vector<std::string>& names) {
  std::vector<BetaRule> out;
  for (const auto& name : names) {
    try {
      out.push_back(beta_rule_from_string(name));
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("{}: {}", flag, e.what()));
    }
  }
  return out;
}

inline CLI::Validator non_negative() {
  return number_in(0, HUGE_VAL, ">= 0");
}
inline CLI::Validator positive() {
  return number_in(std::nextafter(0.0, 1.0), HUGE_VAL, "> 0");
}

}  // namespace recall::cli
