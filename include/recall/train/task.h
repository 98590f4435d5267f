// Training tasks (docs/science.md §6). A task makes batches of token sequences with a mask of the
// positions that are scored; the trainer minimises cross-entropy on those positions only.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "recall/core/torch.h"
#include "recall/train/train_config.h"

namespace recall {

// x: (B, T) int64 inputs; y: (B, T) int64 targets; mask: (B, T) bool, true where y is scored.
struct Batch {
  torch::Tensor x, y, mask;
};

// Draws from a task's generator. std::mt19937_64 is used because its whole state prints to text
// (a checkpoint holds it) and its sequence is fixed by the C++ standard.
using Rng = std::mt19937_64;

class Task {
 public:
  virtual ~Task() = default;
  virtual int64_t vocab_size() const = 0;
  // A training batch of `batch` sequences of length `seq_len`.
  virtual Batch sample(int64_t batch, int64_t seq_len, Rng& rng) const = 0;
  // The evaluation set: `batches` batches drawn from `rng` (mqar, text) or every fact (facts).
  virtual std::vector<Batch> eval_set(int64_t batches, int64_t batch, int64_t seq_len,
                                      Rng& rng) const = 0;
  // Task-specific figures from the evaluation totals: ce_nats is the mean cross-entropy per scored
  // position, accuracy the fraction of scored positions whose argmax is right.
  virtual std::map<std::string, double> summarise(double ce_nats, double accuracy, int64_t n_scored,
                                                  int64_t n_params) const;
  // Token ids <-> text for `recall sample`; token ids written as numbers for the synthetic tasks.
  virtual std::vector<int64_t> encode(const std::string& text) const;
  virtual std::string decode(const std::vector<int64_t>& ids) const;
  // The text vocabulary (units in id order) that a checkpoint stores; empty for synthetic tasks.
  virtual std::vector<int64_t> vocabulary() const { return {}; }
  // One line on the data (text: corpus, size, split) printed at the start of training; may be
  // empty.
  virtual std::string description() const { return {}; }
};

// Multi-query associative recall (Zoology): a context k1 v1 ... kN vN of distinct keys from
// [1, 1 + K) and values from the disjoint range [1 + K, vocab), followed by a query region of
// filler token 0 in which every key appears once at a random even offset; only the position of a
// query key is scored, its target being that key's value. By default keys and values split the
// vocabulary in halves, K = (vocab - 1) / 2; with `values` > 0 the last `values` tokens are the
// values and all the others keys, so that many keys (memories) need few output classes. Values are
// distinct within a sequence while there are enough of them, drawn with repetition beyond.
class MqarTask : public Task {
 public:
  MqarTask(int64_t vocab_size, int64_t pairs, int64_t values = 0);
  int64_t vocab_size() const override { return vocab_; }
  Batch sample(int64_t batch, int64_t seq_len, Rng& rng) const override;
  std::vector<Batch> eval_set(int64_t batches, int64_t batch, int64_t seq_len,
                              Rng& rng) const override;
  int64_t key_begin() const { return 1; }
  int64_t value_begin() const { return value_begin(vocab_, values_); }
  int64_t keys() const { return value_begin() - key_begin(); }
  // The first value token of a vocabulary of `vocab` tokens with `values` values (0: half).
  static int64_t value_begin(int64_t vocab, int64_t values) {
    return values > 0 ? vocab - values : 1 + (vocab - 1) / 2;
  }

 private:
  int64_t vocab_, pairs_, values_;
};

// N random facts (subject, relation) -> object over distinct (subject, relation) pairs; sequences
// are [subject, relation] and the object is scored at the relation's position. Tokens: subjects [0,
// S), relations [S, S + R), objects [S + R, S + R + O). The fact table is fixed by the seed.
class FactsTask : public Task {
 public:
  FactsTask(const TaskConfig& config, uint64_t seed);
  int64_t vocab_size() const override;
  Batch sample(int64_t batch, int64_t seq_len, Rng& rng) const override;
  std::vector<Batch> eval_set(int64_t batches, int64_t batch, int64_t seq_len,
                              Rng& rng) const override;
  // Adds bits = N (log2 #objects - CE in bits), bits_per_param.
  std::map<std::string, double> summarise(double ce_nats, double accuracy, int64_t n_scored,
                                          int64_t n_params) const override;

 private:
  Batch make(const std::vector<int64_t>& fact_ids) const;
  TaskConfig config_;
  std::vector<int64_t> subject_, relation_, object_;  // one entry per fact
};

// The corpus the text task reads when text_file is not set: Debian's fortunes package, about
// 2.5 MB of English in 43 files.
inline constexpr const char* kDefaultTextCorpus = "/usr/share/games/fortunes";

// The text of a text_file: a file as it is, or a folder as the concatenation of its regular files
// (not links, not *.dat, not subfolders) in sorted name order, each normalised (line endings to \n,
// "%" separator lines to blank lines, control bytes other than tab dropped). An empty path is the
// default corpus. Throws std::invalid_argument naming the path when it cannot be read, and
// UsageError before reading when its estimated RAM exceeds `max_ram` bytes (0: what the
// machine has free; recall/core/machine.h check_ram).
struct TextSource {
  std::string name;   // the path read
  std::string text;   // the bytes
  int64_t files = 0;  // files read
};
TextSource read_text_source(const std::string& path, int64_t max_ram = 0);

// Character-level language modelling of a UTF-8 text (read_text_source): the vocabulary is the
// sorted set of bytes or codepoints in it; the last val_fraction of it is held out for evaluation.
class TextTask : public Task {
 public:
  // `vocabulary`, when given (from a checkpoint), must cover the file; otherwise it is built.
  // `max_ram` bounds the corpus's estimated RAM (read_text_source).
  TextTask(const TaskConfig& config, std::vector<int64_t> vocabulary = {}, int64_t max_ram = 0);
  // A task that only encodes and decodes (sampling from a checkpoint without the corpus).
  TextTask(TextUnits units, std::vector<int64_t> vocabulary);
  int64_t vocab_size() const override { return static_cast<int64_t>(units_.size()); }
  Batch sample(int64_t batch, int64_t seq_len, Rng& rng) const override;
  std::vector<Batch> eval_set(int64_t batches, int64_t batch, int64_t seq_len,
                              Rng& rng) const override;
  std::map<std::string, double> summarise(double ce_nats, double accuracy, int64_t n_scored,
                                          int64_t n_params) const override;
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::vector<int64_t> vocabulary() const override { return units_; }
  std::string description() const override { return description_; }

 private:
  Batch windows(const std::vector<int64_t>& data, int64_t batch, int64_t seq_len, Rng& rng) const;
  TextUnits unit_kind_;
  std::vector<int64_t> units_;  // id -> byte or codepoint
  std::vector<int64_t> train_, val_;
  std::string description_;
};

// One row per task kind: how to build it, and what the trainer and the estimates need of it
// without its data. Adding a task is its class above, a row, and its name and keys in
// train_config.cpp.
struct TaskKindRow {
  TaskKind kind;
  // make_task's work for this kind
  std::unique_ptr<Task> (*make)(const TrainConfig& config, const std::vector<int64_t>& vocabulary,
                                int64_t max_ram);
  // The tokens of one training sequence (facts: a subject and a relation; the others seq_len).
  int64_t (*sequence_tokens)(const TrainConfig& config);
  // The fraction of those positions that are scored, where alone the head runs (mqar: its queries,
  // pairs / seq_len; facts: the relation's, 1/2; text: all).
  double (*scored_fraction)(const TrainConfig& config);
  bool vocab_from_data;  // the vocabulary is the data's (text), not the config's vocab_size
};
const TaskKindRow& task_kind(TaskKind kind);

// Builds the task of `config` (reading the text file for text). For text, `vocabulary` is the one a
// checkpoint stored, and `max_ram` bounds the corpus's RAM (read_text_source). Throws
// std::invalid_argument when the task cannot be built from the config.
std::unique_ptr<Task> make_task(const TrainConfig& config,
                                const std::vector<int64_t>& vocabulary = {}, int64_t max_ram = 0);

// Decodes UTF-8 into codepoints; throws std::invalid_argument naming `source` and the byte offset
// of the first invalid sequence.
std::vector<int64_t> utf8_decode(const std::string& bytes, const std::string& source);
std::string utf8_encode(const std::vector<int64_t>& codepoints);

}  // namespace recall
