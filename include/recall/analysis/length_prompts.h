// Evaluation prompts at multiples of the training length, as eval, inspect and extrapolate read
// them: how many mqar pairs a longer prompt holds, the prompts themselves (the generator of the
// run's evaluation set), the check that their evaluation fits in RAM, and the scored positions of
// an mqar batch with the pairs they ask for.
#pragma once
#include <string>
#include <vector>

#include "recall/core/torch.h"
#include "recall/train/task.h"
#include "recall/train/train_config.h"

namespace recall {

// How many mqar pairs a prompt of `multiple` times the training length holds. fixed: the trained
// number, so that only the filler between the queries grows; grow: `multiple` times it, up to
// the keys the vocabulary holds ((vocab_size - 1) / 2), so that a longer context holds more
// memories, not only more copies of the filler.
enum class PairsAtLength { kFixed, kGrow };
std::string to_string(PairsAtLength v);
// Throws std::invalid_argument naming the value and the accepted names.
PairsAtLength pairs_at_length_from_string(const std::string& s);
int64_t mqar_pairs_at(const TrainConfig& config, int64_t multiple, PairsAtLength mode);

// The evaluation prompts of `recall eval` at length seq_len: `batches` times the training batch
// size of sequences (at most max_sequences when > 0) from the generator of the training run's
// evaluation set, in batches of at most kEvalTokens tokens. mqar prompts hold `pairs` pairs (0:
// the trained number).
inline constexpr int64_t kEvalTokens = 16384;
std::vector<Batch> length_prompts(const Task& task, const TrainConfig& config, int64_t seq_len,
                                  int64_t batches, int64_t pairs = 0, int64_t max_sequences = 0);

// The widest multiple of the training length that --lengths accepts before its RAM estimate
// is asked (it keeps the token count of a typo from overflowing).
inline constexpr int64_t kMaxLengthMultiple = int64_t{1} << 16;
// Refuses an empty --lengths or a multiple outside [1, kMaxLengthMultiple] (UsageError).
void check_length_multiples(const std::vector<int64_t>& multiples);
// Refuses, before any work, the first multiple whose evaluation in length_prompts' batches would
// not fit (estimate_eval_ram; all_weights when every head's weights are read): UsageError
// naming --lengths, the estimate and the limit (max_ram when > 0, else what is available).
void check_length_ram(const TrainConfig& config, const std::vector<int64_t>& multiples,
                      const torch::Device& device, int64_t max_ram, bool all_weights);

// The scored positions t of each sequence of an mqar batch with `pairs` pairs, and the context
// position 2i of the pair whose key x[t] is.
struct MqarQueries {
  std::vector<int64_t> t, pair;
};
std::vector<MqarQueries> mqar_queries(const Batch& b, int64_t pairs);

}  // namespace recall
