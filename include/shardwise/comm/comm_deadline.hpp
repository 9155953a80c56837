// Deadlines for communication waits (the collective watchdog's clock). A wait polls its request
// instead of blocking in MPI: blocking MPI calls spin a core for as long as a peer is missing and
// can never give up. Polling spins only briefly, then sleeps a growing slice so a long or hung wait
// costs almost no CPU, and stops at the deadline so the caller can report who it waited for.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace shardwise {

// Default ProcessGroupOptions::comm_timeout_seconds (NCCL's default watchdog timeout is 10 min).
inline constexpr double kDefaultCommTimeoutSeconds = 600.0;
// Exit code of a job the watchdog aborts (2 is kept for bad input).
inline constexpr int kCommTimeoutExitCode = 3;

// Throws InvalidArgument naming `what` unless 0 < seconds <= 1e9 (finite).
void validate_comm_timeout(double seconds, const std::string& what);

// Sleep between two polls of a pending operation. The first kSpinPolls polls do not sleep (most
// operations finish within microseconds); after that the sleep is 1/8 of the time already waited,
// at least kMinSleep and at most kMaxSleep: completion is noticed within ~12% of the wait, and a
// wait that lasts past a few milliseconds polls about once per millisecond.
class PollBackoff {
 public:
  static constexpr int kSpinPolls = 64;
  static constexpr std::chrono::nanoseconds kMinSleep{2000};
  static constexpr std::chrono::nanoseconds kMaxSleep{1000000};

  // Sleep after poll number `polls` (0-based) when `waited` has passed since the wait began.
  static std::chrono::nanoseconds sleep_after(int polls, std::chrono::nanoseconds waited);
};

// The clock and the sleep poll_until runs on. The real one is the steady clock and the thread's
// sleep; tests substitute a simulated clock, so the schedule is checked without timing anything.
struct PollClock {
  std::function<std::chrono::steady_clock::time_point()> now;
  std::function<void(std::chrono::nanoseconds)> sleep;
};
const PollClock& real_poll_clock();

// Calls `done` until it returns true (returns true) or `timeout` has passed since the call began
// (returns false), sleeping per PollBackoff in between; the last sleep is cut at the deadline.
// `done` runs at least once.
bool poll_until(const std::function<bool()>& done, std::chrono::duration<double> timeout,
                const PollClock& clock = real_poll_clock());

// What the watchdog says about a wait that passed its deadline.
struct CommWaitDescription {
  std::string op;                // "all_reduce", "recv", ...
  std::string group;             // the group's name
  int rank = 0;                  // this rank in the group
  std::vector<int> world_ranks;  // world rank of each group rank
  std::uint64_t sequence = 0;    // 1-based number of the operation on this group
  int peer = -1;                 // group rank waited for (send/recv, ring step), else -1
};

// The one-line message printed before the job is aborted.
std::string comm_timeout_message(const CommWaitDescription& wait, double waited_seconds,
                                 double timeout_seconds);

}  // namespace shardwise
