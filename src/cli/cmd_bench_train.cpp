// recall bench train: the throughput of `recall train`'s own loop (see recall/train/bench_train.h).
#include "commands.h"
#include "recall/train/bench_train.h"

namespace recall::cli {

void add_bench_train(CLI::App& bench, Action& action) {
  auto* cmd = bench.add_subcommand(
      "train", "training throughput of recall train's loop on a config, one JSON line");
  auto config = std::make_shared<std::string>();
  auto steps = std::make_shared<int64_t>(0);
  auto device = std::make_shared<std::string>("cpu");
  cmd->add_option("--config", *config, "training config (TOML file or preset name), e.g. bench-gpt")
      ->required();
  cmd->add_option("--steps", *steps,
                  "steps to run, the first 2 untimed warm-up (default: the config's steps)")
      ->check(CLI::Range(int64_t{3}, int64_t{1000000}));
  add_device_option(cmd, *device);
  cmd->callback([&action, config, steps, device] {
    action = [config, steps, device] {
      return run_bench_train(*config, *steps, parse_device(*device));
    };
  });
}

}  // namespace recall::cli
