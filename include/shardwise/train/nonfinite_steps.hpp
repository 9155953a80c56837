// What the trainer does when a step's loss or grad norm is NaN or infinite (lr far too high, bad
// data): skip the step - the optimizer applies no update, as Megatron does for a found-inf step -
// up to training.skip_nonfinite_steps times in the run, then stop with NonFiniteTrainingError
// naming the step. Every rank of the group reaches the same decision (the flag is reduced), so
// no rank goes on alone.
#pragma once

#include <cstdint>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

// Training diverged: stopping is the only safe outcome (nothing is saved from this state).
class NonFiniteTrainingError : public Error {
 public:
  using Error::Error;
};

class NonFiniteSteps {
 public:
  explicit NonFiniteSteps(std::int64_t allowed_skips) : allowed_(allowed_skips) {}

  // Collective over `group`. Returns false when `loss` and `grad_norm` are finite on every rank;
  // true when the step must be skipped (within the allowance); throws NonFiniteTrainingError
  // (on every rank) once the allowance is spent. `step` is 1-based, for the messages.
  bool skip_step(ProcessGroup& group, std::int64_t step, double loss, double grad_norm);

  std::int64_t skipped() const { return skipped_; }

 private:
  std::int64_t allowed_;
  std::int64_t skipped_ = 0;
};

// True on every rank when `local_ok` holds on every rank of `group`.
bool all_ranks_agree(ProcessGroup& group, bool local_ok);

}  // namespace shardwise
