// recall bench train: the throughput of `recall train`'s own loop (see
// recall/experiments/bench_train.h).
#include "commands.h"
#include "recall/experiments/bench_train.h"
#include "recall/train/distributed.h"
#include "recall/train/launch_local.h"
#include "recall/train/train_config.h"

namespace recall::cli {

void add_bench_train(CLI::App& bench, Action& action) {
  auto* cmd = bench.add_subcommand(
      "train", "training throughput of recall train's loop on a config, one JSON line");
  auto config = std::make_shared<std::string>();
  auto steps = std::make_shared<int64_t>(0);
  auto device = std::make_shared<std::string>("cpu");
  auto nproc = std::make_shared<int>(1);
  auto precision = std::make_shared<std::string>();
  cmd->add_option("--config", *config, "a recipe of train/ or a TOML file, e.g. bench-gpt")
      ->required();
  cmd->add_option("--steps", *steps,
                  "steps to run, the first 2 untimed warm-up (default: the config's steps)")
      ->check(CLI::Range(int64_t{3}, int64_t{1000000}));
  add_device_option(cmd, *device);
  add_precision_option(cmd, *precision);
  cmd->add_option("--nproc", *nproc,
                  "train as N processes on this host (each on 1/N of every batch); rank 0 "
                  "prints the line")
      ->check(CLI::Range(1, 1024));
  cmd->callback([&action, config, steps, device, nproc, precision] {
    action = [config, steps, device, nproc, precision] {
      const torch::Device dev = parse_device(*device);
      std::vector<std::string> sets;
      if (!precision->empty()) sets.push_back("precision=" + *precision);
      if (*nproc > 1) {
        train_config_from_file(*config, sets);  // a bad config fails here, once
        return launch_local(*nproc, std::chrono::milliseconds(
                                        static_cast<int64_t>(kDefaultDistTimeoutSeconds * 1000)));
      }
      return run_bench_train(*config, *steps, dev, sets);
    };
  });
}

}  // namespace recall::cli
