#include "shardwise/core/logging.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "shardwise/core/message_text.hpp"

namespace shardwise::log {

namespace {
std::atomic<int> g_rank{0};
std::atomic<int> g_world{0};  // 0: world not known yet, no prefix
std::atomic<Level> g_level{Level::kInfo};
std::mutex g_mutex;

const char* level_tag(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug: ";
    case Level::kInfo:
      return "";
    case Level::kWarning:
      return "shardwise: warning: ";
    case Level::kError:
      return "shardwise: error: ";
  }
  return "";
}
}  // namespace

void set_rank(int rank, int world_size) {
  g_rank = rank;
  g_world = world_size;
}
void set_level(Level level) { g_level = level; }
Level level() { return g_level; }

void write(Level lvl, const std::string& message) {
  if (lvl < g_level) return;
  const bool important = lvl >= Level::kWarning;
  if (!important && g_rank != 0) return;
  // One write per line: a line must not interleave with other output of this process (stdout and
  // stderr often share a pipe) or of other ranks.
  std::string line;
  if (g_world > 1) line = str_cat("[rank ", g_rank.load(), "/", g_world.load(), "] ");
  // Errors and warnings often quote input: keep them one line with no escape sequences.
  line += str_cat(level_tag(lvl), important ? one_line(message) : message, "\n");
  std::lock_guard<std::mutex> lock(g_mutex);
  FILE* out = important ? stderr : stdout;
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

}  // namespace shardwise::log
