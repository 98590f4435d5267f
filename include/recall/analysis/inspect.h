// A trained model's layers as memory stores (docs/science.md §5).
//
// Feed-forward layers: keys are the first-layer rows (swiglu: the gate rows; learned_kv: the slot
// keys of each head), values the second-layer columns (learned_kv: the slot values). Each key k_j
// is queried as x_j = sqrt(d) k_j / ||k_j|| (the norm of an RMS-normalised input of dimension d)
// through the layer's own weights w(x) (mlp: sigma(W1 x + b1); swiglu: silu(W1 x) * (W3 x);
// learned_kv: softmax over the slots of q . k_i / sqrt(d_head), q = x_j), and
//   ISR_j = || sum_{i != j} w_i(x_j) v_i || / || w_j(x_j) v_j ||   (self_recall_isr, isr.h).
//
// Attention heads, on mqar prompts: at a scored query position t, whose key token sits in the
// context at position 2i (its value at 2i + 1), a head that recalls reads one position of the
// pair's neighbourhood 2i + o: o = 0 the key, o = 1 the value (the classic induction head, after a
// previous-token head or the convolution of q, k, v put the key into the value's position, as
// mqar-tiny learns), o = 2 the next key's position (after a first-layer head gathered both the key
// and the value there, as mqar-tiny with RoPE learned). Each
// head's read offset o is the one that takes the most weight over the prompts. With a_s its
// attention weights (softmax over the keys t sees) and a_r the weight on r = 2i + o,
//   ISR_t = || a_{s != r} ||_2 / a_r
// is the ISR of the head as a softmax store with orthogonal values. A head recalls a query when its
// largest weight is on r; it is a recalling head when it does so for >= half the queries. The
// model's accuracy with the head's output zeroed (ablated) says whether the model needs it.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "recall/analysis/probe.h"
#include "recall/core/torch.h"
#include "recall/stores/beta_rule.h"
#include "recall/train/trainer.h"

namespace recall {

class Store;

struct FfnStoreReport {
  int64_t layer = 0;
  std::string kind;  // linear, mlp-<activation>, glu-<gate>, learned_kv
  int64_t keys = 0;  // N (learned_kv: heads x slots)
  int64_t dim = 0;   // key dimension
  IsrSummary isr;
  double recalled = 0;                           // fraction of keys with ISR < 1
  double coherence_mean = 0, coherence_max = 0;  // |cos| between distinct keys
  std::optional<double> theory;  // random-key capacity of the weight function at d = dim
  std::string theory_store;      // the store that theory is for
};

// A block's feed-forward store (linear, mlp, glu or learned_kv; read in float64 on a copy).
FfnStoreReport inspect_feed_forward(const std::shared_ptr<Store>& ffn, int64_t layer);

struct HeadReport {
  int64_t layer = 0, head = 0;
  int64_t offset = 0;           // read position 2i + offset for the pair at 2i
  double pair_weight = 0;       // mean attention weight on the read position
  double hit_rate = 0;          // fraction of queries with the largest weight there
  double ablated_accuracy = 0;  // the model's accuracy with this head zeroed (NaN: not ablated)
  IsrSummary isr;
  bool recalls() const { return hit_rate >= 0.5; }
};

struct AttentionReport {
  int64_t seq_len = 0;
  int64_t pairs = 0;  // mqar pairs in each prompt
  BetaRule rule = BetaRule::kNone;
  double accuracy = 0;  // the model's mqar accuracy on the same prompts
  int64_t prompts = 0;  // sequences read
  std::vector<HeadReport> heads;
};

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

// The widest multiple of the training length that --lengths accepts before its memory estimate
// is asked (it keeps the token count of a typo from overflowing).
inline constexpr int64_t kMaxLengthMultiple = int64_t{1} << 16;
// Refuses, before any work, the first multiple whose evaluation in length_prompts' batches would
// not fit (estimate_eval_memory; all_weights when every head's weights are read): UsageError
// naming --lengths, the estimate and the limit (max_memory when > 0, else what is available).
void check_length_memory(const TrainConfig& config, const std::vector<int64_t>& multiples,
                         const torch::Device& device, int64_t max_memory, bool all_weights);

// The scored positions t of each sequence of an mqar batch with `pairs` pairs, and the context
// position 2i of the pair whose key x[t] is.
struct MqarQueries {
  std::vector<int64_t> t, pair;
};
std::vector<MqarQueries> mqar_queries(const Batch& b, int64_t pairs);

// Per head statistics of `model` on mqar batches with `pairs` key/value pairs.
std::vector<HeadReport> inspect_heads(Transformer& model, const std::vector<Batch>& set,
                                      int64_t pairs);

// Fills ablated_accuracy of each head: the accuracy on `set` with that head's output zeroed.
void ablate_heads(Transformer& model, const Task& task, const std::vector<Batch>& set,
                  std::vector<HeadReport>& heads);

// inspect reads every head's weights over whole prompts, (B, H, T, T) per layer: at m times the
// training length it takes 1/m of the prompts (the same tokens), and at least this many.
inline constexpr int64_t kInspectMinSequences = 4;

struct InspectConfig {
  std::vector<int64_t> lengths = {1, 2, 4, 8, 16};  // multiples of the training length
  std::vector<BetaRule> rules = all_beta_rules();
  int64_t batches = 2;  // evaluation batches of the checkpoint's batch size
  bool ablate = true;   // score the model once more per head with that head zeroed
  PairsAtLength pairs = PairsAtLength::kFixed;  // the mqar pairs of the longer prompts
  int64_t max_memory = 0;  // bytes the lengths may need (check_length_memory); 0: what is free
  // Throws std::invalid_argument naming the flag, its value and the accepted range.
  void validate() const;
};

struct InspectResult {
  std::string checkpoint;
  int64_t step = 0;
  ModelConfig model;
  std::vector<FfnStoreReport> ffn;
  std::vector<AttentionReport> attention;  // empty unless the task is mqar
};

// Restores nothing itself: `restored` comes from restore(path). Changes the model's beta rule.
InspectResult inspect(Restored& restored, const InspectConfig& config,
                      const std::string& checkpoint);

std::string inspect_table(const InspectResult& result);
std::string inspect_json(const InspectResult& result);
// mqar checkpoints: accuracy, and the recalling heads' median ISR, against length per rule; other
// tasks: each feed-forward layer's key ISR (median, p10 to p90). PNG or SVG by the extension.
void write_inspect_plot(const InspectResult& result, const std::string& path);

}  // namespace recall
