// The capacity probe's memories: a seeded stream of keys and values uniform on the unit sphere
// (normalised Gaussian vectors from core/random.h), drawn in fixed blocks so that memory i is the
// same whatever ranges it is read in. Internal to the probe (probe.cpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "recall/core/random.h"
#include "recall/core/torch.h"

namespace recall {

// Seeded stream of unit keys and values. Memories are generated in fixed blocks, each from its own
// generator, so memory i is the same whatever ranges it is read in (grids and chunk sizes differ).
class MemoryStream {
 public:
  MemoryStream(uint64_t seed, int64_t trial, int64_t d_k, int64_t d_v, torch::Device device)
      : seed_(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(trial) + 1))),
        d_k_(d_k),
        d_v_(d_v),
        device_(device) {}

  // Memories [a, b): keys (b - a, d_k), values (b - a, d_v).
  std::pair<torch::Tensor, torch::Tensor> get(int64_t a, int64_t b) {
    std::vector<torch::Tensor> ks, vs;
    for (int64_t i = a; i < b;) {
      const int64_t block = i / kBlock, lo = i - block * kBlock,
                    hi = std::min(b - block * kBlock, kBlock);
      load(block);
      ks.push_back(keys_.slice(0, lo, hi));
      vs.push_back(values_.slice(0, lo, hi));
      i = block * kBlock + hi;
    }
    if (ks.size() == 1) return {ks[0], vs[0]};
    return {torch::cat(ks), torch::cat(vs)};
  }
  static constexpr int64_t kBlock = 16384;

 private:
  void load(int64_t block);  // draws and normalises one block
  uint64_t seed_;
  int64_t d_k_, d_v_, cached_ = -1;
  torch::Device device_;
  torch::Tensor keys_, values_;
};

}  // namespace recall
