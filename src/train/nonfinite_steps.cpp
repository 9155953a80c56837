#include "shardwise/train/nonfinite_steps.hpp"

#include <cmath>

#include "shardwise/core/logging.hpp"

namespace shardwise {

bool all_ranks_agree(ProcessGroup& group, bool local_ok) {
  float bad = local_ok ? 0.0f : 1.0f;
  group.all_reduce(TensorView{&bad, 1, DType::kFloat32}, ReduceOp::kMax)->wait();
  return bad == 0.0f;
}

namespace {

// Step 1 runs on the initial weights: no learning rate has touched them yet.
const char* hint_for(std::int64_t step) {
  return step == 1 ? "the first step runs on the initial weights, before any update: check "
                     "model.init_std (fp32 overflows past 3.4e38) and the data"
                   : "try a lower optimizer.lr or optimizer.muon_lr, or optimizer.clip_grad";
}

}  // namespace

bool NonFiniteSteps::skip_step(ProcessGroup& group, std::int64_t step, double loss,
                               double grad_norm) {
  if (all_ranks_agree(group, std::isfinite(loss) && std::isfinite(grad_norm))) return false;
  const std::string what = str_cat("step ", step, ": non-finite training state (loss ", loss,
                                   ", grad norm ", grad_norm, " on rank ", group.rank(), ")");
  if (skipped_ >= allowed_) {
    throw NonFiniteTrainingError(str_cat(
        what, "; stopping: no update was applied and no checkpoint is saved from this state (",
        skipped_, " step(s) skipped before, training.skip_nonfinite_steps=", allowed_, "; ",
        hint_for(step), ")"));
  }
  ++skipped_;
  if (group.rank() == 0) {
    log::warning(what, "; update skipped (", skipped_, " of ", allowed_,
                 " allowed by training.skip_nonfinite_steps)");
  }
  return true;
}

}  // namespace shardwise
