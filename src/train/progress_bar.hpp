// Rank 0's one-line progress bar, redrawn in place with '\r'. Redraws are rate-limited by time:
// a run of many fast steps writes a few lines per second, not one per step (under mpirun the
// output is often a file or a pipe, where every redraw stays: ~20 MB per 100k steps).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace shardwise::train_detail {

// Whether stdout is a terminal the user watches: a terminal, and not a rank's stdout under
// Open MPI, which hands every rank a pseudo-terminal even when mpirun's output goes to a file.
bool stdout_is_user_terminal();

class ProgressBar {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // At most this many redraws per second, plus the final state.
  static constexpr double kMaxRedrawsPerSecond = 4.0;

  ProgressBar(std::int64_t total, bool enabled, std::FILE* out = stdout, Clock clock = {});
  bool enabled() const { return enabled_; }
  // Records `done` steps with `status`; redraws when the last redraw is old enough, or at the end.
  void update(std::int64_t done, const std::string& status);
  // Before another line is printed: draws a state not yet shown and ends the bar's line.
  void end_line();
  std::int64_t redraws() const { return redraws_; }

 private:
  void draw();

  std::int64_t total_;
  bool enabled_;
  std::FILE* out_;
  Clock clock_;
  std::chrono::steady_clock::time_point last_draw_{};
  std::int64_t redraws_ = 0;
  std::int64_t done_ = 0;
  std::string status_;
  bool pending_ = false;    // an update not drawn yet
  bool line_open_ = false;  // the bar is on screen without its newline
};

}  // namespace shardwise::train_detail
