// The estimates of a training run and of an evaluation: tokens and FLOPs per step, and the RAM
// they need, from the config alone (the parameter count from the modules' own counts,
// model_num_parameters; what a task feeds and scores from its row, task_kind).
#include "recall/train/estimates.h"

#include <fmt/format.h>

#include <algorithm>

#include "recall/core/machine.h"
#include "recall/models/block.h"
#include "recall/models/transformer.h"
#include "recall/ops/gemm.h"
#include "recall/ops/kernels.h"
#include "recall/train/task.h"

namespace recall {
namespace {

// Hidden units per token of a block's feed-forward store (its kind's row); 0 without one.
double ffn_activation_width(const ModelConfig& m) {
  if (m.ffn == FfnKind::kNone) return 0.0;
  const FeedForwardOptions ffn = feed_forward_options(m);
  return static_cast<double>(feed_forward_kind(m.ffn).activation_width(ffn));
}

}  // namespace

int64_t tokens_per_step(const TrainConfig& config) {
  return config.trainer.batch_size * task_kind(config.task.kind).sequence_tokens(config);
}

namespace {
// The head's parameters per token that it does not multiply: V d at the unscored positions.
double unscored_head(const TrainConfig& config) {
  const auto& m = config.model;
  const double scored = task_kind(config.task.kind).scored_fraction(config);
  return (1.0 - scored) * static_cast<double>(m.vocab_size * m.d_model);
}
}  // namespace

double flops_per_token(const TrainConfig& config, int64_t n_params) {
  const auto& m = config.model;
  return 6.0 * (static_cast<double>(n_params) - unscored_head(config)) +
         12.0 * static_cast<double>(m.n_layers * m.d_model * m.seq_len);
}

double useful_flops_per_token(const TrainConfig& config, int64_t n_params) {
  const auto& m = config.model;
  int64_t looked_up = m.pos == PosKind::kLearned ? m.seq_len * m.d_model : 0;
  if (!m.tied_head) looked_up += m.vocab_size * m.d_model;
  return 6.0 * (static_cast<double>(n_params - looked_up) - unscored_head(config)) +
         6.0 * static_cast<double>(m.n_layers * m.d_model * (m.seq_len + 1));
}

double estimate_train_ram(const TrainConfig& config, int workers, std::string* breakdown) {
  const ModelConfig& m = config.model;
  const double d = static_cast<double>(m.d_model), V = static_cast<double>(m.vocab_size),
               L = static_cast<double>(m.n_layers), H = static_cast<double>(m.n_heads);
  const double B = static_cast<double>(config.trainer.batch_size);
  const double T = static_cast<double>(task_kind(config.task.kind).sequence_tokens(config));
  const double hidden = ffn_activation_width(m);  // per block, kept for the backward
  const double params = static_cast<double>(model_num_parameters(m));
  const double state = 4 * params * (3 + std::max(workers, 1));  // weights, 2 moments, gradients
  const double acts = 4 * B * T * (L * (12 * d + 3 * hidden) + 4 * V) + 4 * 3 * L * B * H * T * T;
  const double ckpt = 4 * params * 3;
  if (breakdown)
    *breakdown = fmt::format(
        "{:.3g} parameters: {} with gradients and AdamW moments, {} of activations for batch "
        "{} x {} tokens, {} of checkpoint",
        params, format_bytes(state), format_bytes(acts), config.trainer.batch_size,
        static_cast<int64_t>(T), format_bytes(ckpt));
  return state + acts + ckpt;
}

double estimate_eval_ram(const TrainConfig& config, int64_t seq_len, int64_t batch,
                         const torch::Device& device, std::string* breakdown, bool all_weights) {
  const ModelConfig& m = config.model;
  const double d = static_cast<double>(m.d_model), V = static_cast<double>(m.vocab_size),
               H = static_cast<double>(m.n_heads), B = static_cast<double>(batch),
               T = static_cast<double>(seq_len), N = static_cast<double>(m.attn_mem_kv);
  // the feed-forward's hidden units before and after their activation
  const double hidden = 2 * ffn_activation_width(m);
  const double params = 4 * static_cast<double>(model_num_parameters(m));
  // the residual, its norm, q k v, their unit copies, y and the output: one block at a time
  const double acts = 4 * B * T * (10 * d + hidden);
  // the logits of the scored rows and their softmax: at most every row
  const double logits = 4 * B * T * V * 2;
  const bool fused = !all_weights && fast_gemm_available() && fast_kernels(device);
  const double weights =
      fused ? 4.0 * 64 * (N + T) * std::max(1, at::get_num_threads()) : 4 * 3 * B * H * T * (N + T);
  if (breakdown)
    *breakdown = fmt::format(
        "{} of parameters, {} of activations and {} of logits for batch {} x {} tokens, {} of "
        "attention weights ({})",
        format_bytes(params), format_bytes(acts), format_bytes(logits), batch, seq_len,
        format_bytes(weights), fused ? "the fused path, linear in the length" : "B H T^2 of them");
  return params + acts + logits + weights;
}

double estimate_sample_ram(const TrainConfig& config, int64_t samples, int64_t length,
                           const torch::Device& device, std::string* breakdown) {
  const ModelConfig& m = config.model;
  std::string forward;
  const double eval = estimate_eval_ram(config, m.seq_len, samples, device, &forward);
  // (N, H, T, d_head) keys and values per layer
  const double cache = 2.0 * 4 * static_cast<double>(m.n_layers) * static_cast<double>(samples) *
                       static_cast<double>(m.seq_len) * static_cast<double>(m.d_model);
  const double ids = 8.0 * static_cast<double>(samples) * static_cast<double>(length);
  if (breakdown)
    *breakdown = fmt::format("{}; {} of cached keys and values, {} of token ids", forward,
                             format_bytes(cache), format_bytes(ids));
  return eval + cache + ids;
}

}  // namespace recall
