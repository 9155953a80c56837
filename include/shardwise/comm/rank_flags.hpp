// Which ranks of a group raised a flag, for errors that every rank must raise together (one rank
// failing alone would leave the others waiting in the next collective).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"

namespace shardwise {

// The ranks of `group` whose `flag` is set, in order; every rank gets the same answer (one
// all-reduce, so every rank must call it).
std::vector<int> ranks_with_flag(ProcessGroup& group, bool flag);

// The ranks of `group` whose `value` differs from rank 0's (a fingerprint of what each read);
// every rank gets the same answer (a broadcast and an all-reduce, so every rank must call it).
std::vector<int> ranks_differing_from_rank0(ProcessGroup& group, std::uint64_t value);

// Runs `step` on this rank, then every rank learns whose step threw (one all-reduce, so every
// rank must call it, each with a step of its own). A rank whose step threw rethrows that
// exception; the others get the ranks that failed (empty when none did) and raise their own
// error naming them, so one rank's failure fails the whole group and none is left waiting in the
// next collective.
std::vector<int> run_on_every_rank(ProcessGroup& group, const std::function<void()>& step);

// `text` as rank `root` has it, on every rank (two broadcasts, so every rank must call it).
std::string broadcast_text(ProcessGroup& group, const std::string& text, int root);

// "0, 2, 5": ranks for a message.
std::string rank_list(const std::vector<int>& ranks);

}  // namespace shardwise
