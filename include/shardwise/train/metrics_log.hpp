// The trainer's JSONL metrics file (--log-jsonl): one JSON object per step or evaluation, flushed
// line by line so a reader (or a crash) sees whole lines. Every write and flush is checked: a
// full disk or a vanished file is an IoError naming the path, never a silently truncated log.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace shardwise {

class MetricsLog {
 public:
  // Inactive (writes nothing) when `active` is false or `path` is empty, e.g. on ranks other
  // than 0. Otherwise creates or truncates `path`.
  MetricsLog(const std::string& path, bool active);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::ordered_json& record);
  // Flushes and closes, checking both (the destructor closes without reporting).
  void close();

 private:
  [[noreturn]] void fail(const char* what, int error);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace shardwise
