// Deadlines for communication waits (the collective watchdog's clock). A wait polls its request
// instead of blocking in MPI: blocking MPI calls spin a core for as long as a peer is missing and
// can never give up. Polling spins only briefly, then sleeps a growing slice so a long or hung wait
// costs almost no CPU, and stops at the deadline so the caller can report who it waited for.
// A wait whose polls themselves move the data (an MPI request: see PollMode) yields instead of
// sleeping for its first 100 ms and sleeps at most 100 us after that.
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
  // PollMode::kDrivesProgress: how long a wait yields the core between polls before it sleeps,
  // and its longest sleep after that (each poll still moves some data; ~9% of a core).
  static constexpr std::chrono::nanoseconds kDriveProgressFor{100000000};
  static constexpr std::chrono::nanoseconds kDriveProgressMaxSleep{100000};

  // Sleep after poll number `polls` (0-based) when `waited` has passed since the wait began.
  static std::chrono::nanoseconds sleep_after(int polls, std::chrono::nanoseconds waited);
};

// The clock, the sleep and the yield poll_until runs on. The real one is the steady clock, the
// thread's sleep and sched_yield; tests substitute a simulated clock, so the schedule is checked
// without timing anything.
struct PollClock {
  std::function<std::chrono::steady_clock::time_point()> now;
  std::function<void(std::chrono::nanoseconds)> sleep;
  std::function<void()> yield;
};
const PollClock& real_poll_clock();

// Whether the operation a wait polls completes without the polls.
enum class PollMode {
  // It finishes on its own (a GPU stream, a peer's store into shared memory): after the spin
  // phase the wait sleeps per PollBackoff.
  kCompletesAlone,
  // Each poll is what moves its data: MPI progresses only inside MPI calls, and without a
  // single-copy mechanism (no CMA in most containers, any network) a large message moves a few
  // fragments per call, so a wait that sleeps between its MPI_Tests stalls the transfer (a 16 MiB
  // message ran 12x slower than MPI_Waitall). After the spin phase the wait yields the core
  // between polls (a rank sharing its core lets the others run) for kDriveProgressFor, then
  // sleeps per PollBackoff but never longer than kDriveProgressMaxSleep.
  kDrivesProgress,
};

// Calls `done` until it returns true (returns true) or `timeout` has passed since the call began
// (returns false), spinning, yielding and sleeping in between per `mode`; the last sleep is cut at
// the deadline. `done` runs at least once.
bool poll_until(const std::function<bool()>& done, std::chrono::duration<double> timeout,
                PollMode mode = PollMode::kCompletesAlone,
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
