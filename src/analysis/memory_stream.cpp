#include "recall/analysis/memory_stream.h"

#include <chrono>
#include <cmath>
#include <memory>

#include "recall/core/threads.h"
#include "recall/ops/normal.h"
#include "recall/ops/row_math.h"

namespace recall {

namespace {

// Keys (n, d_k) and values (n, d_v), unit rows, from Gaussian rows x (n, d_k + d_v).
RECALL_VECTOR_CLONES void unit_keys_and_values(const float* x, int64_t n, int64_t d_k, int64_t d_v,
                                               float* keys, float* values) {
  for (int64_t r = 0; r < n; ++r) {
    const float* k = x + r * (d_k + d_v);
    const float* v = k + d_k;
    const float ik = 1.0f / std::sqrt(row_math::dot_of(k, k, d_k)),
                iv = 1.0f / std::sqrt(row_math::dot_of(v, v, d_v));
    for (int64_t j = 0; j < d_k; ++j) keys[r * d_k + j] = k[j] * ik;
    for (int64_t j = 0; j < d_v; ++j) values[r * d_v + j] = v[j] * iv;
  }
}

}  // namespace

// Plain loops: a torch op on a worker thread would start torch's per-thread set-up there (a new
// OpenMP team and thread pool).
void MemoryStream::draw(int64_t block, int64_t piece, float* keys, float* values) const {
  const auto t0 = std::chrono::steady_clock::now();
  // (kPieceRows, d_k + d_v) Gaussian rows; not zeroed first, as every element is drawn
  const int64_t d = d_k_ + d_v_;
  std::unique_ptr<float[]> x(new float[static_cast<size_t>(kPieceRows * d)]);
  const uint64_t base = splitmix64(seed_ + static_cast<uint64_t>(block));
  fill_normal(x.get(), kPieceRows * d, splitmix64(base + static_cast<uint64_t>(piece)));
  unit_keys_and_values(x.get(), kPieceRows, d_k_, d_v_, keys, values);
  draw_ns_ +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
}

void MemoryStream::load(int64_t block) {
  if (block == cached_) return;
  auto keys = torch::empty({kBlock, d_k_}), values = torch::empty({kBlock, d_v_});
  float* kp = keys.data_ptr<float>();
  float* vp = values.data_ptr<float>();
  parallel_claim(kPieces, [&](int64_t i, int) {
    draw(block, i, kp + i * kPieceRows * d_k_, vp + i * kPieceRows * d_v_);
  });
  keys_ = keys.to(device_);
  values_ = values.to(device_);
  cached_ = block;
}

}  // namespace recall
