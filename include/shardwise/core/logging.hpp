// Rank-aware logging. Lines carry a "[rank R/W]" prefix once the world is known; only
// rank 0 prints info lines (warnings and errors print on every rank).
#pragma once

#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise::log {

enum class Level { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Called once the process knows its place in the world (comm layer does this).
void set_rank(int rank, int world_size);
void set_level(Level level);
Level level();

void write(Level level, const std::string& message);

template <typename... Args>
void debug(Args&&... args) {
  if (level() <= Level::kDebug) write(Level::kDebug, str_cat(std::forward<Args>(args)...));
}
template <typename... Args>
void info(Args&&... args) {
  if (level() <= Level::kInfo) write(Level::kInfo, str_cat(std::forward<Args>(args)...));
}
template <typename... Args>
void warning(Args&&... args) {
  write(Level::kWarning, str_cat(std::forward<Args>(args)...));
}
template <typename... Args>
void error(Args&&... args) {
  write(Level::kError, str_cat(std::forward<Args>(args)...));
}

}  // namespace shardwise::log
