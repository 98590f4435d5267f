// recall sample: continue a prompt with a trained model (text: characters; other tasks: token ids).
#include <fmt/format.h>

#include "commands.h"
#include "recall/core/error.h"
#include "recall/train/trainer.h"

namespace recall::cli {

void add_sample(CLI::App& root, Action& action) {
  struct Args {
    std::string checkpoint, prompt;
    int64_t tokens = 200, seed = 0;
    double temperature = 1.0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = root.add_subcommand("sample", "generate from a checkpoint");
  cmd->add_option("--checkpoint", args->checkpoint, kCheckpointHelp)->required();
  cmd->add_option("--prompt", args->prompt, "text to continue (token ids for mqar and facts)");
  cmd->add_option("--tokens", args->tokens, "tokens to generate")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", args->temperature, "0 picks the most likely token")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--seed", args->seed, "sampling seed")->check(CLI::NonNegativeNumber);
  cmd->callback([args, &action] {
    action = [args] {
      Restored r = restore(args->checkpoint);
      // sampling needs only the vocabulary, not the corpus
      auto task = r.config.task.kind == TaskKind::kText
                      ? std::make_unique<TextTask>(r.config.task.text_units, r.vocabulary)
                      : make_task(r.config);
      std::vector<int64_t> ids = task->encode(args->prompt);
      torch::manual_seed(static_cast<uint64_t>(args->seed));
      if (ids.empty()) ids.push_back(torch::randint(task->vocab_size(), {1}).item<int64_t>());
      const size_t prompt_len = ids.size();
      torch::NoGradGuard no_grad;
      const auto ctx = static_cast<size_t>(r.config.model.seq_len);
      for (int64_t i = 0; i < args->tokens; ++i) {
        const size_t from = ids.size() > ctx ? ids.size() - ctx : 0;
        auto x = torch::tensor(std::vector<int64_t>(ids.begin() + from, ids.end())).unsqueeze(0);
        auto logits = r.model->forward(x).select(1, -1).squeeze(0).to(torch::kDouble);
        const int64_t next =
            args->temperature == 0
                ? logits.argmax().item<int64_t>()
                : torch::multinomial(torch::softmax(logits / args->temperature, -1), 1)
                      .item<int64_t>();
        ids.push_back(next);
      }
      fmt::print("{}{}\n", task->decode({ids.begin(), ids.begin() + prompt_len}),
                 (r.config.task.kind == TaskKind::kText ? "" : " ") +
                     task->decode({ids.begin() + prompt_len, ids.end()}));
      return 0;
    };
  });
}

}  // namespace recall::cli
