// Attention heads as softmax stores on mqar prompts, and the whole inspection of a checkpoint.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "recall/analysis/inspect.h"
#include "recall/core/enum_names.h"
#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/models/activation_cache.h"
#include "recall/models/block.h"

namespace recall {

std::vector<MqarQueries> mqar_queries(const Batch& b, int64_t pairs) {
  auto x = b.x.accessor<int64_t, 2>();
  auto mask = b.mask.accessor<bool, 2>();
  std::vector<MqarQueries> out(static_cast<size_t>(b.x.size(0)));
  for (int64_t s = 0; s < b.x.size(0); ++s)
    for (int64_t t = 2 * pairs; t < b.x.size(1); ++t) {
      if (!mask[s][t]) continue;
      for (int64_t i = 0; i < pairs; ++i)
        if (x[s][2 * i] == x[s][t]) {
          out[s].t.push_back(t);
          out[s].pair.push_back(2 * i);
          break;
        }
    }
  return out;
}

namespace {

// Per head and per read offset o (the head reads position 2i + o of the pair, o < kOffsets).
constexpr int64_t kOffsets = 3;

struct HeadAccumulator {
  std::array<std::vector<double>, kOffsets> isr;
  std::array<double, kOffsets> weight{};
  std::array<int64_t, kOffsets> hits{};
};

// Adds the statistics of one layer's heads at one sequence's queries, from the weights the model
// itself computed (the activation cache): a (H, T, N + T), N learned memories first.
void add_heads(const torch::Tensor& a_seq, int64_t N, const MqarQueries& queries,
               std::vector<HeadAccumulator>& acc) {
  const int64_t P = static_cast<int64_t>(queries.t.size()), H = a_seq.size(0);
  if (P == 0) return;
  auto t = torch::tensor(queries.t, torch::kInt64);            // (P,)
  auto pair = torch::tensor(queries.pair, torch::kInt64) + N;  // (P,) key column of 2i
  auto a = a_seq.index_select(1, t).to(torch::kFloat64);       // (H, P, N + T)
  auto top = a.argmax(-1);                                     // (H, P)
  for (int64_t o = 0; o < kOffsets; ++o) {
    // 2i + o <= 2 n <= t: the read position is always visible
    auto col = (pair + o).view({1, P, 1}).expand({H, P, 1});
    auto a_read = a.gather(2, col).squeeze(2);  // (H, P)
    // the rest's norm from the other weights themselves: no cancellation when a_read ~ 1
    auto a_rest = a.scatter(2, col, 0.0).square().sum(-1).sqrt();  // (H, P)
    // the ISR of self_recall_isr (isr.h) with orthonormal values, from the weights alone
    auto isr = (a_rest / a_read).contiguous();
    auto weight = a_read.sum(1);          // (H,)
    auto hits = top.eq(pair + o).sum(1);  // (H,)
    for (int64_t h = 0; h < H; ++h) {
      auto& s = acc[h];
      const double* p = isr[h].data_ptr<double>();
      s.isr[o].insert(s.isr[o].end(), p, p + P);
      s.weight[o] += weight[h].item<double>();
      s.hits[o] += hits[h].item<int64_t>();
    }
  }
}

}  // namespace

std::vector<HeadReport> inspect_heads(Transformer& model, const std::vector<Batch>& set,
                                      int64_t pairs) {
  torch::NoGradGuard no_grad;
  const int64_t L = model->config.n_layers, H = model->config.n_heads;
  std::vector<std::vector<HeadAccumulator>> acc(L, std::vector<HeadAccumulator>(H));
  const auto device = model->parameters().front().device();
  for (const Batch& b : set) {
    const auto queries = mqar_queries(b, pairs);
    ActivationCache cache;
    model->forward(b.x.to(device), &cache);
    for (int64_t l = 0; l < L; ++l) {
      // (B, H, T, N + T), read on the CPU
      const auto a = cache.at(fmt::format("blocks.{}.attn.weights", l)).cpu();
      const int64_t N = a.size(3) - a.size(2);
      for (int64_t s = 0; s < b.x.size(0); ++s)
        add_heads(a[s], N, queries[static_cast<size_t>(s)], acc[l]);
    }
  }
  std::vector<HeadReport> out;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) {
      const auto& a = acc[l][h];
      // the head's read offset: where it puts the most weight over the whole set
      const int64_t o = std::max_element(a.weight.begin(), a.weight.end()) - a.weight.begin();
      const double n = static_cast<double>(std::max<size_t>(1, a.isr[o].size()));
      HeadReport r;
      r.layer = l;
      r.head = h;
      r.offset = o;
      r.pair_weight = a.weight[o] / n;
      r.hit_rate = static_cast<double>(a.hits[o]) / n;
      r.isr = summarize(a.isr[o]);
      out.push_back(r);
    }
  return out;
}

void ablate_heads(Transformer& model, const Task& task, const std::vector<Batch>& set,
                  std::vector<HeadReport>& heads) {
  torch::NoGradGuard no_grad;
  for (HeadReport& r : heads) {
    auto& attn = *model->blocks[r.layer]->attn;
    auto mask = torch::ones({model->config.n_heads});
    mask[r.head] = 0.0;
    attn.set_head_mask(mask);
    r.ablated_accuracy = evaluate(model, task, set).at("accuracy");
    attn.set_head_mask(torch::ones_like(mask));
  }
}

namespace {
constexpr std::array<const char*, 2> kPairsNames = {"fixed", "grow"};
}  // namespace

std::string to_string(PairsAtLength v) {
  return enum_name(kPairsNames, v);
}

PairsAtLength pairs_at_length_from_string(const std::string& s) {
  return enum_from_name<PairsAtLength>(kPairsNames, s, "--pairs");
}

int64_t mqar_pairs_at(const TrainConfig& config, int64_t multiple, PairsAtLength mode) {
  const int64_t trained = config.task.mqar_pairs;
  if (mode == PairsAtLength::kFixed) return trained;
  const int64_t keys =
      MqarTask::value_begin(config.model.vocab_size, config.task.mqar_values) - 1;  // [1, value)
  // 4 pairs a token at most fit (MqarTask), and seq_len >= 4 mqar_pairs already
  return std::max(trained, std::min(trained * multiple, keys));
}

std::vector<Batch> length_prompts(const Task& task, const TrainConfig& config, int64_t seq_len,
                                  int64_t batches, int64_t pairs, int64_t max_sequences) {
  Rng rng(static_cast<uint64_t>(config.trainer.seed) ^ 0x5bd1e9955bd1e995ULL);  // as recall eval
  if (config.task.kind != TaskKind::kMqar)
    return task.eval_set(batches, config.trainer.batch_size, seq_len, rng);
  // mqar draws one sequence after another from the generator: the same prompts at any chunk size
  int64_t sequences = batches * config.trainer.batch_size;
  if (max_sequences > 0) sequences = std::min(sequences, max_sequences);
  const int64_t per =
      std::min(config.trainer.batch_size, std::max<int64_t>(1, kEvalTokens / seq_len));
  const Task* from = &task;
  std::unique_ptr<Task> more;
  if (pairs > 0 && pairs != config.task.mqar_pairs) {
    more = std::make_unique<MqarTask>(config.model.vocab_size, pairs, config.task.mqar_values);
    from = more.get();
  }
  std::vector<Batch> set;
  for (int64_t done = 0; done < sequences; done += per) {
    auto part = from->eval_set(1, std::min(per, sequences - done), seq_len, rng);
    set.insert(set.end(), part.begin(), part.end());
  }
  return set;
}

void check_length_memory(const TrainConfig& config, const std::vector<int64_t>& multiples,
                         const torch::Device& device, int64_t max_memory, bool all_weights) {
  for (int64_t m : multiples) {
    const int64_t T = m * config.model.seq_len;
    const int64_t per = std::min(config.trainer.batch_size, std::max<int64_t>(1, kEvalTokens / T));
    std::string parts;
    const double bytes = estimate_eval_memory(config, T, per, device, &parts, all_weights);
    check_memory(fmt::format("--lengths {} ({} tokens)", m, T), bytes, parts, max_memory);
  }
}

void InspectConfig::validate() const {
  check_arg(!lengths.empty(), "--lengths is empty: give multiples of the training length");
  for (int64_t m : lengths)
    check_arg(m >= 1 && m <= kMaxLengthMultiple,
              fmt::format("--lengths {}: each must be in [1, {}]; the memory estimate bounds "
                          "them further",
                          m, kMaxLengthMultiple));
  check_arg(!rules.empty(), "--rules is empty: give some of none, su, qwen, yarn, ssmax");
  check_arg(batches >= 1 && batches <= 1000,
            fmt::format("--batches {}: must be in [1, 1000]", batches));
}

InspectResult inspect(Restored& restored, const InspectConfig& config,
                      const std::string& checkpoint) {
  config.validate();
  const TrainConfig& tc = restored.config;
  const ModelConfig& mc = tc.model;
  for (int64_t m : config.lengths)
    if (mc.pos == PosKind::kLearned && m > 1)
      throw UsageError(fmt::format(
          "--lengths {}: this model has learned positions for {} tokens, only 1 is possible", m,
          mc.seq_len));
  if (tc.task.kind == TaskKind::kMqar)
    check_length_memory(tc, config.lengths, restored.model->parameters().front().device(),
                        config.max_memory, /*all_weights=*/true);
  InspectResult out{checkpoint, restored.step, mc, {}, {}};
  Transformer& model = restored.model;
  for (int64_t l = 0; l < mc.n_layers; ++l)
    if (model->blocks[l]->ffn) out.ffn.push_back(inspect_feed_forward(model->blocks[l]->ffn, l));
  if (tc.task.kind != TaskKind::kMqar) return out;
  auto task = make_task(tc, restored.vocabulary);
  const BetaRule trained = mc.attn_rule;
  for (BetaRule rule : config.rules) {
    model->set_attn_rule(rule);
    for (int64_t m : config.lengths) {
      const int64_t T = m * mc.seq_len;
      const int64_t pairs = mqar_pairs_at(tc, m, config.pairs);
      const auto set = length_prompts(
          *task, tc, T, config.batches, pairs,
          std::max(kInspectMinSequences, config.batches * tc.trainer.batch_size / m));
      int64_t prompts = 0;
      for (const Batch& b : set) prompts += b.x.size(0);
      auto heads = inspect_heads(model, set, pairs);
      if (config.ablate)
        ablate_heads(model, *task, set, heads);
      else
        for (auto& h : heads) h.ablated_accuracy = std::numeric_limits<double>::quiet_NaN();
      out.attention.push_back(
          {T, pairs, rule, evaluate(model, *task, set).at("accuracy"), prompts, heads});
    }
  }
  model->set_attn_rule(trained);
  return out;
}

}  // namespace recall
