// recall bench train: training throughput of the transformer (see recall/bench_train.h).
#include "commands.h"
#include "recall/train/bench_train.h"

namespace recall::cli {

void add_bench_train(CLI::App& bench, Action& action) {
  auto* cmd = bench.add_subcommand("train", "training throughput: full AdamW steps, one JSON line");
  auto config = std::make_shared<std::string>();
  auto steps = std::make_shared<int>(0);
  cmd->add_option("--config", *config,
                  "flat TOML (model keys plus batch_size, lr, steps) or the preset bench-gpt")
      ->required();
  cmd->add_option("--steps", *steps, "timed steps (default: the config's steps, else 10)")
      ->check(CLI::PositiveNumber);
  cmd->callback([&action, config, steps] {
    action = [config, steps] { return run_bench_train(*config, *steps); };
  });
}

}  // namespace recall::cli
