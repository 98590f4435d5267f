// recall sample: continue a prompt with a trained model (text: characters; other tasks: token
// ids), decoding incrementally with a KV cache: each new token attends to the cached keys and
// values instead of running the whole context again. Past seq_len tokens the context slides: each
// token then reads the last seq_len tokens in one forward, as the model saw them in training.
#include <fmt/format.h>

#include <filesystem>
#include <limits>
#include <optional>

#include "commands.h"
#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/train/estimates.h"
#include "recall/train/metrics.h"
#include "recall/train/trainer.h"

namespace recall::cli {

namespace {

// The next token of each row of logits (N, vocab): the most likely at temperature 0, else drawn
// from softmax(logits / temperature) over the top_k most likely (0: all).
// Drawn on the CPU: the same seed picks the same tokens on every device.
torch::Tensor pick(torch::Tensor logits, double temperature, int64_t top_k) {
  logits = logits.to(torch::kCPU, torch::kDouble);
  if (temperature == 0) return logits.argmax(-1);  // (N,)
  if (top_k > 0 && top_k < logits.size(-1)) {
    auto kth = std::get<0>(logits.topk(top_k, -1)).select(-1, top_k - 1).unsqueeze(-1);  // (N, 1)
    logits = logits.masked_fill(logits < kth, -std::numeric_limits<double>::infinity());
  }
  return torch::multinomial(torch::softmax(logits / temperature, -1), 1).squeeze(-1);  // (N,)
}

// The validation bits per character the run logged when it wrote this checkpoint (its folder's
// evaluation at the checkpoint's step), if it logged one.
std::optional<double> logged_bits_per_char(const std::string& checkpoint, int64_t step) {
  namespace fs = std::filesystem;
  const fs::path run =
      fs::is_directory(checkpoint) ? fs::path(checkpoint) : fs::path(checkpoint).parent_path();
  const auto eval = eval_at(read_metrics(run.string()), step);
  return eval ? eval->get("bits_per_char") : std::nullopt;
}

}  // namespace

void add_sample(CLI::App& root, Action& action) {
  struct Args {
    std::string checkpoint, prompt, device = "cpu", precision;
    int64_t tokens = 200, seed = 0, top_k = 0, samples = 1;
    int64_t max_ram = 0;
    double temperature = 1.0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = root.add_subcommand("sample", "generate from a checkpoint");
  cmd->add_option("--checkpoint", args->checkpoint, kCheckpointHelp)->required();
  cmd->add_option("--prompt", args->prompt, "text to continue (token ids for mqar and facts)");
  cmd->add_option("--tokens", args->tokens, "tokens to generate")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", args->temperature, "0 picks the most likely token")
      ->check(number_in(0, 100, "in [0, 100]"));
  cmd->add_option("--top-k", args->top_k, "draw from the k most likely tokens only (0: all)")
      ->check(non_negative());
  cmd->add_option("--samples", args->samples, "independent continuations, one per line")
      ->check(CLI::Range(1, 4096));
  // a bound below int64's: a seed past it was taken as the largest int64, silently
  cmd->add_option("--seed", args->seed, "sampling seed")
      ->check(number_in(0, 9e18, "from 0 to 9e18"));
  add_device_option(cmd, args->device);
  add_precision_option(cmd, args->precision);
  add_max_ram(cmd, args->max_ram);
  cmd->callback([args, &action] {
    action = [args] {
      const torch::Device device = parse_device(args->device);
      const ScopedPrecision precision(checked_precision(args->precision, device));
      const AutocastScope autocast(device);
      Restored r = restore(args->checkpoint, device);
      // sampling needs only the vocabulary, not the corpus
      auto task = r.config.task.kind == TaskKind::kText
                      ? std::make_unique<TextTask>(r.config.task.text_units, r.vocabulary)
                      : make_task(r.config);
      std::vector<int64_t> prompt = task->encode(args->prompt);
      torch::manual_seed(static_cast<uint64_t>(args->seed));
      if (prompt.empty()) prompt.push_back(torch::randint(task->vocab_size(), {1}).item<int64_t>());
      const int64_t N = args->samples, ctx = r.config.model.seq_len;
      std::string parts;
      check_ram(fmt::format("--samples {} --tokens {}", N, args->tokens),
                estimate_sample_ram(r.config, N, static_cast<int64_t>(prompt.size()) + args->tokens,
                                    device, &parts),
                parts, args->max_ram);
      torch::NoGradGuard no_grad;
      // ids (N, length): every row starts with the prompt
      auto ids = torch::tensor(prompt).unsqueeze(0).repeat({N, 1}).to(device);
      KvCache kv;
      torch::Tensor logits;  // (N, vocab) after the last token
      if (ids.size(1) <= ctx) logits = r.model->forward_incremental(ids, kv).select(1, -1);
      for (int64_t i = 0; i < args->tokens; ++i) {
        if (!logits.defined()) {  // past seq_len: the last ctx tokens in one forward
          kv.clear();
          logits = r.model->forward(ids.narrow(1, ids.size(1) - ctx, ctx)).select(1, -1);
        }
        auto next = pick(logits, args->temperature, args->top_k).unsqueeze(1).to(device);  // (N, 1)
        ids = torch::cat({ids, next}, 1);
        logits = ids.size(1) <= ctx ? r.model->forward_incremental(next, kv).select(1, -1)
                                    : torch::Tensor();
      }
      if (r.config.task.kind == TaskKind::kText)
        if (const auto bpc = logged_bits_per_char(args->checkpoint, r.step))
          fmt::print(stderr, "# {} (step {}): {:.4f} validation bits per character\n",
                     args->checkpoint, r.step, *bpc);
      const auto plen = static_cast<std::ptrdiff_t>(prompt.size());
      for (int64_t n = 0; n < N; ++n) {
        auto row = ids[n].to(torch::kCPU).contiguous();
        std::vector<int64_t> all(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
        fmt::print("{}{}\n", task->decode({all.begin(), all.begin() + plen}),
                   (r.config.task.kind == TaskKind::kText ? "" : " ") +
                       task->decode({all.begin() + plen, all.end()}));
      }
      return 0;
    };
  });
}

}  // namespace recall::cli
