// The watchdog's clock: back-off schedule, polling until done or the deadline (on a simulated
// clock: the CPU share and wake-up latency on a real one are measured by bench/comm_wait.cpp),
// and the message printed when a wait times out.
#include "shardwise/comm/comm_deadline.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <vector>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using Clock = std::chrono::steady_clock;

TEST(PollBackoff, SpinsFirstThenSleepsAGrowingSliceCappedAtOneMillisecond) {
  for (int polls = 0; polls < PollBackoff::kSpinPolls; ++polls) {
    EXPECT_EQ(PollBackoff::sleep_after(polls, milliseconds(50)).count(), 0) << polls;
  }
  const int later = PollBackoff::kSpinPolls;
  EXPECT_EQ(PollBackoff::sleep_after(later, microseconds(1)), microseconds(2));      // floor
  EXPECT_EQ(PollBackoff::sleep_after(later, microseconds(800)), microseconds(100));  // 1/8
  EXPECT_EQ(PollBackoff::sleep_after(later, milliseconds(4)), microseconds(500));
  EXPECT_EQ(PollBackoff::sleep_after(later, milliseconds(8)), milliseconds(1));  // cap reached
  EXPECT_EQ(PollBackoff::sleep_after(later + 1000, std::chrono::hours(5)), milliseconds(1));
  // Never longer than an eighth of the wait once past the floor: completion is noticed late by
  // at most ~12%.
  for (auto waited = microseconds(16); waited < milliseconds(100); waited *= 2) {
    EXPECT_LE(PollBackoff::sleep_after(later, waited), nanoseconds(waited) / 8) << waited.count();
  }
}

// A clock that moves only when poll_until sleeps or yields (a yield takes kYieldTakes): what
// poll_until does is checked poll by poll, with no wall-clock threshold that a loaded machine could
// break.
struct SimulatedPollClock {
  static constexpr nanoseconds kYieldTakes = microseconds(50);
  Clock::time_point now{};
  std::vector<nanoseconds> sleeps;
  std::vector<Clock::time_point> yields;  // when each yield began

  PollClock clock() {
    return PollClock{[this] { return now; },
                     [this](nanoseconds sleep) {
                       sleeps.push_back(sleep);
                       now += sleep;
                     },
                     [this] {
                       yields.push_back(now);
                       now += kYieldTakes;
                     }};
  }
  nanoseconds slept() const {
    nanoseconds total{0};
    for (nanoseconds s : sleeps) total += s;
    return total;
  }
};

TEST(PollUntil, ReturnsTrueAsSoonAsDoneWithoutSleepingForQuickOperations) {
  SimulatedPollClock simulated;
  int calls = 0;
  EXPECT_TRUE(poll_until([&] { return ++calls == 10; }, std::chrono::seconds(5),
                         PollMode::kCompletesAlone, simulated.clock()));
  EXPECT_EQ(calls, 10);
  EXPECT_TRUE(simulated.sleeps.empty()) << "within the spin phase: no sleep at all";
}

TEST(PollUntil, NoticesCompletionWithinOneSleepOfAtMostAMillisecond) {
  SimulatedPollClock simulated;
  const auto ready_at = simulated.now + milliseconds(40);
  int calls = 0;
  EXPECT_TRUE(poll_until(
      [&] {
        ++calls;
        return simulated.now >= ready_at;
      },
      std::chrono::seconds(10), PollMode::kCompletesAlone, simulated.clock()));
  ASSERT_FALSE(simulated.sleeps.empty());
  // Completion is seen at the first poll after it: late by less than the last sleep, which is
  // at most PollBackoff::kMaxSleep.
  EXPECT_GE(simulated.now, ready_at);
  EXPECT_LT(simulated.now - ready_at, simulated.sleeps.back());
  EXPECT_LE(simulated.sleeps.back(), PollBackoff::kMaxSleep);
  EXPECT_EQ(calls, PollBackoff::kSpinPolls + static_cast<int>(simulated.sleeps.size()) + 1);
}

TEST(PollUntil, GivesUpAtTheDeadlineSleepingThroughTheWait) {
  SimulatedPollClock simulated;
  int calls = 0;
  EXPECT_FALSE(poll_until([&] { return ++calls < 0; }, milliseconds(400), PollMode::kCompletesAlone,
                          simulated.clock()));
  EXPECT_TRUE(simulated.yields.empty());
  // The last sleep is cut at the deadline: the wait ends exactly there.
  EXPECT_EQ(simulated.now - Clock::time_point{}, milliseconds(400));
  // Every poll after the spin phase is followed by a sleep (no busy loop), none longer than
  // kMaxSleep, and together they are the whole wait.
  ASSERT_EQ(calls, PollBackoff::kSpinPolls + static_cast<int>(simulated.sleeps.size()) + 1);
  EXPECT_EQ(simulated.slept(), milliseconds(400));
  for (nanoseconds sleep : simulated.sleeps) {
    EXPECT_GT(sleep.count(), 0);
    EXPECT_LE(sleep, PollBackoff::kMaxSleep);
  }
  // A wait that has lasted a few milliseconds polls about once per millisecond: the ramp from
  // kMinSleep to kMaxSleep takes a few dozen polls, then one per kMaxSleep.
  EXPECT_LT(calls, PollBackoff::kSpinPolls + 100 + 400) << "polls in 0.4 s";
  EXPECT_GE(calls, PollBackoff::kSpinPolls + 400 - 10);
}

// An MPI request moves its data only while it is polled: the wait yields the core between polls
// (never sleeping) for PollBackoff::kDriveProgressFor, then sleeps at most kDriveProgressMaxSleep.
TEST(PollUntil, AWaitThatDrivesProgressYieldsFirstThenSleepsBriefly) {
  SimulatedPollClock simulated;
  int calls = 0;
  const auto timeout = std::chrono::seconds(3);
  EXPECT_FALSE(poll_until([&] { return ++calls < 0; }, timeout, PollMode::kDrivesProgress,
                          simulated.clock()));
  EXPECT_EQ(simulated.now - Clock::time_point{}, nanoseconds(timeout));
  ASSERT_FALSE(simulated.yields.empty());
  // Spin, then yield until kDriveProgressFor has passed: every poll in that second is followed by a
  // yield, none by a sleep.
  const auto yielding_ends = Clock::time_point{} + PollBackoff::kDriveProgressFor;
  EXPECT_LT(simulated.yields.back(), yielding_ends);
  EXPECT_GE(simulated.yields.back() + SimulatedPollClock::kYieldTakes, yielding_ends);
  EXPECT_EQ(simulated.yields.size(), static_cast<std::size_t>(PollBackoff::kDriveProgressFor /
                                                              SimulatedPollClock::kYieldTakes));
  // The rest of the wait sleeps, each sleep the back-off's but at most kDriveProgressMaxSleep:
  // one poll per 100 us.
  const nanoseconds sleeping = nanoseconds(timeout) - PollBackoff::kDriveProgressFor;
  EXPECT_EQ(simulated.slept(), sleeping);
  for (nanoseconds sleep : simulated.sleeps) EXPECT_EQ(sleep, PollBackoff::kDriveProgressMaxSleep);
  EXPECT_EQ(simulated.sleeps.size(),
            static_cast<std::size_t>(sleeping / PollBackoff::kDriveProgressMaxSleep));
  EXPECT_EQ(calls, PollBackoff::kSpinPolls + static_cast<int>(simulated.yields.size()) +
                       static_cast<int>(simulated.sleeps.size()) + 1);
}

TEST(PollUntil, AWaitThatDrivesProgressNoticesCompletionAtTheNextPoll) {
  SimulatedPollClock simulated;
  const auto ready_at = simulated.now + milliseconds(40);
  EXPECT_TRUE(poll_until([&] { return simulated.now >= ready_at; }, std::chrono::seconds(10),
                         PollMode::kDrivesProgress, simulated.clock()));
  EXPECT_TRUE(simulated.sleeps.empty());
  EXPECT_LE(simulated.now - ready_at, SimulatedPollClock::kYieldTakes);
}

TEST(PollUntil, ATimeoutOfZeroStillPollsOnce) {
  int calls = 0;
  EXPECT_TRUE(poll_until([&] { return ++calls == 1; }, nanoseconds(0)));
  EXPECT_FALSE(poll_until([&] { return false; }, nanoseconds(0)));
}

TEST(CommTimeout, ValidationNamesTheSetting) {
  EXPECT_NO_THROW(validate_comm_timeout(0.5, "x"));
  EXPECT_NO_THROW(validate_comm_timeout(kDefaultCommTimeoutSeconds, "x"));
  for (double bad : {0.0, -1.0, 2e9, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    try {
      validate_comm_timeout(bad, "--comm-timeout");
      FAIL() << bad << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("--comm-timeout"), std::string::npos) << e.what();
    }
  }
}

TEST(CommTimeoutMessage, CollectiveNamesOpGroupRanksAndSequence) {
  CommWaitDescription wait{"all_reduce", "dp[0,2,4]", 1, {0, 2, 4}, 17, -1};
  EXPECT_EQ(comm_timeout_message(wait, 3.04, 3),
            "comm watchdog: rank 1 of group dp[0,2,4] (world ranks 0,2,4): all_reduce #17 has "
            "not completed after 3.0 s (comm_timeout 3.0 s); waiting for one or more of group "
            "ranks 0,2 (world ranks 0,4); a collective cannot tell which: the ranks that print no "
            "message for all_reduce #17 of this group did not arrive");
}

TEST(CommTimeoutMessage, PointToPointNamesThePeer) {
  CommWaitDescription recv{"recv", "pp[1,3]", 0, {1, 3}, 4, 1};
  EXPECT_EQ(comm_timeout_message(recv, 600.2, 600),
            "comm watchdog: rank 0 of group pp[1,3] (world ranks 1,3): recv #4 from rank 1 has "
            "not completed after 600.2 s (comm_timeout 600.0 s); waiting for group rank 1 (world "
            "rank 3)");
  CommWaitDescription send{"send", "world", 1, {0, 1}, 9, 0};
  EXPECT_NE(comm_timeout_message(send, 1, 1).find("send #9 to rank 0"), std::string::npos);
  CommWaitDescription ring{"reduce_scatter", "world", 2, {0, 1, 2, 3}, 3, 1};
  EXPECT_NE(comm_timeout_message(ring, 1, 1)
                .find("reduce_scatter #3 has not completed after 1.0 s "
                      "(comm_timeout 1.0 s); waiting for group rank 1 "
                      "(world rank 1), a peer it exchanges data with"),
            std::string::npos)
      << comm_timeout_message(ring, 1, 1);
}

}  // namespace
}  // namespace shardwise
