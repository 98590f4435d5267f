// Attention heads as softmax stores on mqar prompts.
#include "recall/analysis/inspect_heads.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "recall/core/enum_names.h"
#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/models/activation_cache.h"
#include "recall/models/block.h"
#include "recall/train/trainer.h"

namespace recall {

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
    auto& attn = *model->block(r.layer)->attn;
    auto mask = torch::ones({model->config.n_heads});
    mask[r.head] = 0.0;
    attn.set_head_mask(mask);
    r.ablated_accuracy = evaluate(model, task, set).at("accuracy");
    attn.set_head_mask(torch::ones_like(mask));
  }
}

}  // namespace recall
