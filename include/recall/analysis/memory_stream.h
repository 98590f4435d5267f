// The capacity probe's memories: a seeded stream of keys and values uniform on the unit sphere
// (normalised Gaussian vectors from ops/normal.h), drawn in fixed blocks so that memory i is the
// same whatever ranges it is read in. Internal to the probe (probe.cpp, probe_fused.cpp).
#pragma once
#include <algorithm>
#include <atomic>
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
  int64_t d_k() const { return d_k_; }
  int64_t d_v() const { return d_v_; }

  // A block is drawn in kPieces pieces of kPieceRows memories, each from a seed of its own:
  // draw(block, piece, keys, values) fills rows [piece kPieceRows, (piece + 1) kPieceRows) of the
  // block into keys (kPieceRows, d_k) and values (kPieceRows, d_v), on any thread, with the same
  // bits whichever thread draws which piece. The fused probe draws blocks itself this way, beside
  // its other work; get() draws the blocks it needs in one parallel region.
  static constexpr int64_t kPieceRows = 2048;
  static constexpr int64_t kPieces = kBlock / kPieceRows;
  void draw(int64_t block, int64_t piece, float* keys, float* values) const;
  // thread-seconds spent drawing, summed over this stream's draws
  double draw_seconds() const { return static_cast<double>(draw_ns_.load()) * 1e-9; }

 private:
  void load(int64_t block);  // draws and normalises one block, the cached one then
  uint64_t seed_;
  int64_t d_k_, d_v_, cached_ = -1;
  torch::Device device_;
  torch::Tensor keys_, values_;
  mutable std::atomic<int64_t> draw_ns_{0};
};

}  // namespace recall
