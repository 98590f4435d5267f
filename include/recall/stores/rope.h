// Rotary position embedding (RoPE, rotate-half form): channel pairs (i, i + d/2) of a head vector
// at position t are rotated by the angle t * base^(-2i/d), so that q_t . k_s depends on t - s only.
#pragma once
#include "recall/core/torch.h"

namespace recall {

struct RopeTables {
  torch::Tensor cos;  // (T, d)
  torch::Tensor sin;  // (T, d)
};

// The base of the rotation frequencies, base^(-2i / d).
inline constexpr double kRopeBase = 10000.0;

// Tables for positions 0..T-1 and an even head dimension d, with the dtype and device of `like`
// (the input's x.options()).
RopeTables rope_tables(int64_t T, int64_t d, const torch::TensorOptions& like,
                       double base = kRopeBase);

// x: (B, T, H, d) -> rotated x, same shape.
torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables);

}  // namespace recall
