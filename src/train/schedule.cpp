// Warmup avoids large early Adam steps while its second-moment estimate is still poor; the cosine
// then anneals to min_lr by the last step.
#include <algorithm>
#include <cmath>

#include "recall/train/trainer.h"

namespace recall {

double lr_at(const TrainerConfig& c, int64_t step) {
  if (step < c.warmup_steps)
    return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  const int64_t decay = std::max<int64_t>(1, c.steps - c.warmup_steps);
  const double progress = std::min(1.0, static_cast<double>(step - c.warmup_steps) / decay);
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace recall
