// recall train: a run from a TOML config into a folder; stopped by SIGINT/SIGTERM after a
// checkpoint. --nproc N: N processes on this host (recall/train/launch_local.h).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "output.h"
#include "recall/train/distributed.h"
#include "recall/train/launch_local.h"
#include "recall/train/trainer.h"

namespace recall::cli {

void add_train(CLI::App& root, Action& action) {
  struct Args {
    std::string config, out, device = "cpu", precision;
    std::vector<std::string> sets;
    bool resume = false;
    int64_t max_ram = 0;
    int nproc = 1;
    double dist_timeout = kDefaultDistTimeoutSeconds;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = root.add_subcommand("train", "train a model on a task (mqar, facts, text)");
  cmd->add_option("--config", args->config, "a recipe of train/ (mqar-tiny) or a TOML file")
      ->required();
  cmd->add_option("--set", args->sets, "override a config key: --set key=value (repeatable)");
  cmd->add_option("--out", args->out, "run folder: checkpoint.bin, metrics.jsonl, config.toml")
      ->required();
  cmd->add_flag("--resume", args->resume, "continue the run in --out exactly where it stopped");
  add_device_option(cmd, args->device);
  add_precision_option(cmd, args->precision);
  add_max_ram(cmd, args->max_ram);
  cmd->add_option("--nproc", args->nproc,
                  "train as N processes on this host, each on 1/N of every batch (default 1)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--dist-timeout", args->dist_timeout,
                  "seconds a process waits for the others (to start, in every gradient "
                  "exchange) before it fails (default 300)")
      ->check(number_in(1, 86400, "in [1, 86400]"));
  cmd->callback([args, &action] {
    if (!args->precision.empty()) args->sets.push_back("precision=" + args->precision);
    action = [args] {
      const auto timeout =
          std::chrono::milliseconds(static_cast<int64_t>(args->dist_timeout * 1000));
      if (args->nproc > 1) {
        train_config_from_file(args->config, args->sets);  // a bad config fails here, once
        parse_device(args->device);
        return launch_local(args->nproc, timeout);
      }
      TrainOptions options;
      options.device = parse_device(args->device);
      const TrainConfig config = train_config_from_file(args->config, args->sets);
      options.out_dir = args->out;
      options.resume = args->resume;
      options.max_ram = args->max_ram;
      options.dist_timeout_s = args->dist_timeout;
      options.stop = stop_on_signal();
      options.progress = !quiet();
      return run_stoppable(
          [&] {
            const TrainResult r = train(config, options);
            if (dist_env_from_environment().rank != 0) return r.stopped_by ? 128 + r.stopped_by : 0;
            nlohmann::json summary{
                {"step", r.step},
                {"loss", r.losses.empty() ? nullptr : nlohmann::json(r.losses.back())}};
            if (r.stopped_by) summary["stopped_by_signal"] = r.stopped_by;
            if (r.stopped_by && !quiet())
              fmt::print(stderr,
                         "stopped by signal {} after step {}; checkpoint written to {} (continue "
                         "with --resume)\n",
                         r.stopped_by, r.step, args->out);
            for (const auto& [k, v] : r.eval) summary["eval"][k] = v;
            fmt::print("{}\n", summary.dump());
            return r.stopped_by ? 128 + r.stopped_by : 0;
          },
          "continue with --resume");
    };
  });
}

}  // namespace recall::cli
