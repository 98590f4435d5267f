#include "recall/stores/rope.h"

#include "recall/core/error.h"

namespace recall {

RopeTables rope_tables(int64_t T, int64_t d, const torch::TensorOptions& like, double base) {
  check_arg(d % 2 == 0, fmt::format("rope: head dimension {} must be even", d));
  // Angles in float64 on the CPU, then rounded once: the same tables on every device.
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto inv_freq = torch::pow(base, -torch::arange(0, d, 2, opts) / static_cast<double>(d));
  auto angles = torch::outer(torch::arange(T, opts), inv_freq);  // (T, d/2)
  angles = torch::cat({angles, angles}, -1);                     // (T, d)
  return {angles.cos().to(like.device(), like.dtype().toScalarType()),
          angles.sin().to(like.device(), like.dtype().toScalarType())};
}

torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& tables) {
  const int64_t half = x.size(-1) / 2;
  auto rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);  // (-x2, x1)
  return x * tables.cos.unsqueeze(1) + rotated * tables.sin.unsqueeze(1);  // tables (T, 1, d)
}

}  // namespace recall
