#include "progress_bar.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace shardwise::train_detail {

bool stdout_is_user_terminal() {
  if (::isatty(::fileno(stdout)) == 0) return false;
  // Open MPI's launcher sets these in every rank; its pty says nothing about where mpirun's own
  // output goes.
  return std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr &&
         std::getenv("OMPI_COMM_WORLD_RANK") == nullptr;
}

ProgressBar::ProgressBar(std::int64_t total, bool enabled, std::FILE* out, Clock clock)
    : total_(total), enabled_(enabled), out_(out), clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
}

void ProgressBar::update(std::int64_t done, const std::string& status) {
  if (!enabled_) return;
  done_ = done;
  status_ = status;
  pending_ = true;
  const auto now = clock_();
  const std::chrono::duration<double> since = now - last_draw_;
  if (redraws_ == 0 || done == total_ || since.count() * kMaxRedrawsPerSecond >= 1.0) {
    last_draw_ = now;
    draw();
  }
  if (done == total_) end_line();
}

void ProgressBar::end_line() {
  if (!enabled_) return;
  if (pending_) draw();
  if (line_open_) std::fputc('\n', out_);
  line_open_ = false;
  std::fflush(out_);
}

void ProgressBar::draw() {
  constexpr int kWidth = 30;
  const std::int64_t shown = std::clamp<std::int64_t>(done_, 0, std::max<std::int64_t>(total_, 0));
  const int filled = static_cast<int>(kWidth * shown / std::max<std::int64_t>(1, total_));
  std::fprintf(out_, "\r[%s%s] %lld/%lld %s", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), static_cast<long long>(done_),
               static_cast<long long>(total_), status_.c_str());
  std::fflush(out_);
  ++redraws_;
  pending_ = false;
  line_open_ = true;
}

}  // namespace shardwise::train_detail
