// Learning-rate schedule: linear warm-up from lr/warmup to lr, then cosine decay to min_lr at the
// last step (or constant after warm-up).
#pragma once

#include <cstdint>

namespace shardwise {

struct LrScheduleParams {
  double max_lr = 1e-3;
  double min_lr = 0.0;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;
  bool cosine = true;
};

// LR of 0-based step `step`.
double learning_rate_at(const LrScheduleParams& params, std::int64_t step);

}  // namespace shardwise
