// What a run costs, from its config alone: the tokens and FLOPs of a training step, and the RAM
// that training, evaluation and sampling need (checked against the machine before they start).
// The parameters are the modules' own counts (model_num_parameters, held to the built model for
// every shape in the models' tests), what a task feeds and scores its row's (task_kind); the
// training estimate is held to what a step allocates in tests/train/test_train_ram.cpp.
#pragma once
#include <cstdint>
#include <string>

#include "recall/core/torch.h"
#include "recall/train/train_config.h"

namespace recall {

// Tokens a step trains on: batch_size x seq_len (facts: batch_size x 2).
int64_t tokens_per_step(const TrainConfig& config);

// FLOPs per trained token, 6 N + 12 L d T (nanoGPT's estimate) for a model of n_params. It counts
// the embedding tables as if they were multiplied and causal attention as full attention. The
// head (V x d) counts only at the positions scored (mqar: its pairs' queries, facts: one of two),
// where alone it runs (TransformerImpl::forward_at).
double flops_per_token(const TrainConfig& config, int64_t n_params);

// The FLOPs a token's training does usefully: 6 per parameter that takes part in a product (not
// the looked-up token and learned position tables, unless the token table is the tied head; the
// head at the scored positions only) and causal attention counted once, 6 L d (T + 1) (each query
// sees (T + 1) / 2 keys on average).
double useful_flops_per_token(const TrainConfig& config, int64_t n_params);

// Estimated peak bytes of training `config` with `workers` data-parallel workers: fp32
// parameters, their gradients (one set per worker) and AdamW's two moments; the activations kept
// for the backward pass of a batch_size x seq_len batch (per block about 12 d + 3 ffn-hidden
// floats per token, and 3 per attention weight, B H T^2; the logits 4 B T V); and the checkpoint's
// serialised copy of parameters and moments. `breakdown` gets the parts in words.
double estimate_train_ram(const TrainConfig& config, int workers, std::string* breakdown);

// Estimated peak bytes of evaluating `config`'s model on batches of `batch` sequences of
// `seq_len` tokens on `device`, without gradients: the fp32 parameters, a block's activations
// (about 10 d floats per token), the logits (B T V), and the attention's weights: one block of 64
// query rows per thread on the fused path, whose memory grows linearly in T, or 3 B H T^2 floats on
// the plain-torch path or when every head's weights are kept (`all_weights`, recall inspect). This
// is what bounds the lengths that evaluation, extrapolation and inspection accept.
double estimate_eval_ram(const TrainConfig& config, int64_t seq_len, int64_t batch,
                         const torch::Device& device, std::string* breakdown,
                         bool all_weights = false);

// Bytes `recall sample` needs for `samples` continuations of `length` tokens in all (prompt and
// generated): the eval forward of `samples` rows at the training length (the context that slides
// past it), the key-value cache of every layer over that context, and the token ids.
double estimate_sample_ram(const TrainConfig& config, int64_t samples, int64_t length,
                           const torch::Device& device, std::string* breakdown);

}  // namespace recall
