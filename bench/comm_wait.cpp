// What a communication wait costs on a real clock, the figures the watchdog's polling was built
// for (tests check the polling schedule on a simulated clock, tests/comm/comm_deadline_test.cpp):
//   cpu share  CPU seconds per wall second of a 0.4 s wait that never completes: poll_until
//              (spin, then sleep with back-off) vs a spinning wait that polls without sleeping,
//              as a blocking MPI_Wait does; and of the sleeping phase of a wait that drives
//              progress (PollMode::kDrivesProgress, after its 100 ms of yielding);
//   wake-up    how long after an operation completes poll_until notices it (completion 40 ms into
//              the wait, median of the repeats), against the longest sleep between two polls
//              (PollBackoff::kMaxSleep), the bound the back-off is designed to.
//   bench_comm_wait [--repeats 9]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_harness.hpp"
#include "shardwise/comm/comm_deadline.hpp"
#include "shardwise/core/cpu_time.hpp"

namespace {

using namespace shardwise;
using bench::Clock;
using bench::median;

constexpr auto kWait = std::chrono::milliseconds(400);
constexpr auto kReadyAfter = std::chrono::milliseconds(40);

// CPU seconds per wall second of `wait`.
template <typename Wait>
double cpu_share(Wait&& wait) {
  const double cpu0 = thread_cpu_seconds();
  const double wall = bench::seconds_of(wait);
  return (thread_cpu_seconds() - cpu0) / wall;
}

double poll_until_cpu_share() {
  return cpu_share([] { poll_until([] { return false; }, kWait); });
}

// The same wait on a request whose polls move its data (an MPI request): it yields for
// PollBackoff::kDriveProgressFor, then sleeps briefly; measured from the first poll after the
// yielding (the poll itself notes the CPU time then) to the end of a further 0.4 s.
double drives_progress_cpu_share() {
  const auto sleeping_from = Clock::now() + PollBackoff::kDriveProgressFor;
  Clock::time_point t0{};
  double cpu0 = 0;
  poll_until(
      [&] {
        if (t0 == Clock::time_point{} && Clock::now() >= sleeping_from) {
          t0 = Clock::now();
          cpu0 = thread_cpu_seconds();
        }
        return false;
      },
      PollBackoff::kDriveProgressFor + kWait, PollMode::kDrivesProgress);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  return (thread_cpu_seconds() - cpu0) / wall;
}

double spin_cpu_share() {
  return cpu_share([] {
    const auto end = Clock::now() + kWait;
    while (Clock::now() < end) {
    }
  });
}

// Seconds between the completion and the poll that saw it.
double wake_up_seconds() {
  const auto ready_at = Clock::now() + kReadyAfter;
  Clock::time_point seen;
  poll_until(
      [&] {
        seen = Clock::now();
        return seen >= ready_at;
      },
      std::chrono::seconds(10));
  return std::chrono::duration<double>(seen - ready_at).count();
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 9;
  bench::parse_bench_options("bench_comm_wait", argc, argv, {{"--repeats", &repeats}});
  std::vector<double> ours, drives_progress, spin, wake_up;
  for (int i = 0; i < repeats; ++i) {
    ours.push_back(poll_until_cpu_share());
    drives_progress.push_back(drives_progress_cpu_share());
    spin.push_back(spin_cpu_share());
    wake_up.push_back(wake_up_seconds());
  }
  const double ours_share = median(ours);
  const double spin_share = median(spin);
  const double wake_up_ms = 1e3 * median(wake_up);
  const double bound_ms = std::chrono::duration<double, std::milli>(PollBackoff::kMaxSleep).count();
  std::printf("bench: comm_wait_cpu_share ours=%.4f baseline_spin=%.4f unit=cpu/wall ratio=%.4f\n",
              ours_share, spin_share, ours_share / spin_share);
  std::printf(
      "bench: comm_wait_cpu_share_drives_progress ours=%.4f baseline_spin=%.4f unit=cpu/wall "
      "ratio=%.4f\n",
      median(drives_progress), spin_share, median(drives_progress) / spin_share);
  std::printf("bench: comm_wait_wake_up ours=%.3f bound=%.3f unit=ms ratio=%.3f\n", wake_up_ms,
              bound_ms, wake_up_ms / bound_ms);
  return 0;
}
