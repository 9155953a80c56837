// CPU time consumed so far, in seconds: by the calling thread, or by the whole process (all its
// threads). On a machine shared with other jobs these leave out the time the scheduler gave to
// them, where wall time would not.
#pragma once

#include <time.h>

namespace shardwise {

inline double cpu_clock_seconds(clockid_t clock) {
  timespec t{};
  ::clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

inline double thread_cpu_seconds() { return cpu_clock_seconds(CLOCK_THREAD_CPUTIME_ID); }
inline double process_cpu_seconds() { return cpu_clock_seconds(CLOCK_PROCESS_CPUTIME_ID); }

}  // namespace shardwise
