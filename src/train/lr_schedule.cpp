#include "shardwise/train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace shardwise {

double learning_rate_at(const LrScheduleParams& p, std::int64_t step) {
  if (step < p.warmup_steps) {
    return p.max_lr * static_cast<double>(step + 1) / static_cast<double>(p.warmup_steps);
  }
  if (!p.cosine) return p.max_lr;
  const std::int64_t decay_steps = std::max<std::int64_t>(1, p.total_steps - p.warmup_steps - 1);
  const double progress = std::clamp(
      static_cast<double>(step - p.warmup_steps) / static_cast<double>(decay_steps), 0.0, 1.0);
  return p.min_lr + 0.5 * (p.max_lr - p.min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace shardwise
