#include "recall/analysis/probe_weights.h"

#include <vector>

#include "recall/ops/row_math.h"

namespace recall {

torch::Tensor relative_weights(const WeightFunction& w, const torch::Tensor& s) {
  if (w.kind == WeightKind::kSoftmax) return torch::exp((s - 1.0) * w.beta);
  const double one = w(1.0);
  if (w.kind == WeightKind::kLinear) return s.clone();
  return one == 1.0 ? w(s) : w(s) / one;
}

namespace {

using row_math::Vec;

// The weight function as floats, with what each kind needs precomputed.
struct Params {
  WeightKind kind;
  int p;
  float beta, inv_one;
  std::vector<float> inv_j;  // exp series: 1 / j for j = 1 .. n-1
};

RECALL_INLINE Vec weight(const Params& w, Vec s) {
  switch (w.kind) {
    case WeightKind::kLinear:
      return s;
    case WeightKind::kReluPow: {  // max(0, s)^p
      const Vec r = row_math::vmax(s, row_math::splat(0.0f));
      Vec y = r;
      for (int k = 1; k < w.p; ++k) y *= r;
      return y * w.inv_one;
    }
    case WeightKind::kSwiglu: {  // s^2 sigmoid(s), sigmoid from exp(-|s|) <= 1
      const Vec e = row_math::exp_nonpositive(s < 0.0f ? s : -s);
      const Vec sig = (s < 0.0f ? e : row_math::splat(1.0f)) / (1.0f + e);
      return s * s * sig * w.inv_one;
    }
    case WeightKind::kExpSeries: {  // Horner: 1 + bs (1 + bs/2 (1 + bs/3 (...)))
      const Vec bs = s * w.beta;
      Vec acc = row_math::splat(1.0f);
      for (auto j = static_cast<int64_t>(w.inv_j.size()); j >= 1; --j)
        acc = 1.0f + acc * bs * w.inv_j[j - 1];
      return acc * w.inv_one;
    }
    case WeightKind::kSoftmax:  // exp(beta (s - 1)): s <= 1 up to rounding, so the exponent <= 0
      return row_math::exp_nonpositive((s - 1.0f) * w.beta);
  }
  return s;
}

RECALL_VECTOR_CLONES void weight_rows(const Params& w, const float* S, int64_t lds, float* W,
                                      int64_t ldw, int64_t rows, int64_t cols) {
  using row_math::kLanes;
  for (int64_t i = 0; i < rows; ++i) {
    const float* s = S + i * lds;
    float* o = W + i * ldw;
    int64_t j = 0;
    for (; j + kLanes <= cols; j += kLanes)
      row_math::store(o + j, weight(w, row_math::load(s + j)));
    if (j < cols) {  // the tail through a padded vector
      float tail[kLanes] = {};
      std::copy(s + j, s + cols, tail);
      row_math::store(tail, weight(w, row_math::load(tail)));
      std::copy(tail, tail + (cols - j), o + j);
    }
  }
}

}  // namespace

void relative_weights_rows(const WeightFunction& w, const float* S, int64_t lds, float* W,
                           int64_t ldw, int64_t rows, int64_t cols) {
  Params p{w.kind, w.p, static_cast<float>(w.beta), static_cast<float>(1.0 / w(1.0)), {}};
  if (w.kind == WeightKind::kSoftmax || w.kind == WeightKind::kLinear) p.inv_one = 1.0f;
  for (int j = 1; j < w.n && w.kind == WeightKind::kExpSeries; ++j)
    p.inv_j.push_back(1.0f / static_cast<float>(j));
  weight_rows(p, S, lds, W, ldw, rows, cols);
}

}  // namespace recall
