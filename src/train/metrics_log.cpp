#include "shardwise/train/metrics_log.hpp"

#include <cerrno>
#include <cstring>

#include "shardwise/core/error.hpp"

namespace shardwise {

MetricsLog::MetricsLog(const std::string& path, bool active) : path_(path) {
  if (!active || path.empty()) return;
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) fail("cannot create", errno);
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::fail(const char* what, int error) {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  throw IoError(str_cat(what, " metrics file '", path_,
                        "': ", error != 0 ? std::strerror(error) : "write failed",
                        " (the metrics log is incomplete)"));
}

void MetricsLog::write(const nlohmann::ordered_json& record) {
  if (file_ == nullptr) return;
  const std::string line = record.dump() + '\n';
  errno = 0;
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size()) fail("cannot write", errno);
  if (std::fflush(file_) != 0) fail("cannot write", errno);
}

void MetricsLog::close() {
  if (file_ == nullptr) return;
  std::FILE* file = file_;
  file_ = nullptr;
  errno = 0;
  const bool flushed = std::fflush(file) == 0;
  const int flush_error = errno;
  const bool closed = std::fclose(file) == 0;
  if (!flushed || !closed) {
    throw IoError(str_cat("cannot write metrics file '", path_,
                          "': ", std::strerror(flushed ? errno : flush_error),
                          " (the metrics log is incomplete)"));
  }
}

}  // namespace shardwise
