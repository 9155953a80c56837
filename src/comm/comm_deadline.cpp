#include "shardwise/comm/comm_deadline.hpp"

#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

using Clock = std::chrono::steady_clock;

// Linux rounds sleeps up by the thread's timer slack (50 us by default), which would turn the
// short early sleeps into long ones; once per polling thread, ask for 1 us.
void tighten_timer_slack() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
}

std::string compact_rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += str_cat(out.empty() ? "" : ",", r);
  return out;
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", seconds);
  return text;
}

}  // namespace

void validate_comm_timeout(double seconds, const std::string& what) {
  // Below 0.1 s a healthy collective on a loaded machine already times out (1e-9 was accepted,
  // then every job ended in the watchdog).
  SW_REQUIRE(std::isfinite(seconds) && seconds >= 0.1 && seconds <= 1e9, InvalidArgument, what,
             ": the communication timeout must be a number of seconds from 0.1 to 1e9, got ",
             seconds);
}

std::chrono::nanoseconds PollBackoff::sleep_after(int polls, std::chrono::nanoseconds waited) {
  if (polls < kSpinPolls) return std::chrono::nanoseconds{0};
  return std::clamp(waited / 8, kMinSleep, kMaxSleep);
}

const PollClock& real_poll_clock() {
  static const PollClock clock{[] { return Clock::now(); },
                               [](std::chrono::nanoseconds sleep) {
                                 tighten_timer_slack();
                                 std::this_thread::sleep_for(sleep);
                               },
                               [] { ::sched_yield(); }};
  return clock;
}

bool poll_until(const std::function<bool()>& done, std::chrono::duration<double> timeout,
                PollMode mode, const PollClock& clock) {
  const auto start = clock.now();
  const auto limit = std::chrono::duration_cast<Clock::duration>(timeout);
  for (int polls = 0;; ++polls) {
    if (done()) return true;
    const auto waited = clock.now() - start;
    if (waited >= limit) return false;
    if (mode == PollMode::kDrivesProgress && polls >= PollBackoff::kSpinPolls &&
        waited < PollBackoff::kDriveProgressFor) {
      clock.yield();
      continue;
    }
    auto sleep = PollBackoff::sleep_after(polls, waited);
    if (mode == PollMode::kDrivesProgress)
      sleep = std::min(sleep, PollBackoff::kDriveProgressMaxSleep);
    if (sleep.count() > 0) {
      clock.sleep(std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::min<Clock::duration>(sleep, limit - waited)));
    }
  }
}

std::string comm_timeout_message(const CommWaitDescription& wait, double waited_seconds,
                                 double timeout_seconds) {
  auto world_of = [&](int r) {
    return r >= 0 && static_cast<std::size_t>(r) < wait.world_ranks.size()
               ? wait.world_ranks[static_cast<std::size_t>(r)]
               : -1;
  };
  std::string head =
      str_cat("comm watchdog: rank ", wait.rank, " of group ", wait.group, " (world ranks ",
              compact_rank_list(wait.world_ranks), "): ", wait.op, " #", wait.sequence);
  std::string waiting_for;
  const bool point_to_point = wait.op == "send" || wait.op == "recv";
  if (wait.peer >= 0) {
    if (point_to_point) head += str_cat(wait.op == "send" ? " to" : " from", " rank ", wait.peer);
    waiting_for =
        str_cat("waiting for group rank ", wait.peer, " (world rank ", world_of(wait.peer),
                point_to_point ? ")" : "), a peer it exchanges data with");
  } else {
    std::vector<int> others;
    std::vector<int> others_world;
    for (int r = 0; r < static_cast<int>(wait.world_ranks.size()); ++r) {
      if (r == wait.rank) continue;
      others.push_back(r);
      others_world.push_back(world_of(r));
    }
    waiting_for = str_cat("waiting for one or more of group ranks ", compact_rank_list(others),
                          " (world ranks ", compact_rank_list(others_world),
                          "); a collective cannot tell which: the ranks that print no message for ",
                          wait.op, " #", wait.sequence, " of this group did not arrive");
  }
  return str_cat(head, " has not completed after ", seconds_text(waited_seconds),
                 " s (comm_timeout ", seconds_text(timeout_seconds), " s); ", waiting_for);
}

}  // namespace shardwise
