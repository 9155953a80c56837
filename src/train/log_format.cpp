#include "shardwise/train/log_format.hpp"

#include <cmath>

#include "shardwise/core/error.hpp"

namespace shardwise {

std::string comm_hidden_text(double hidden_fraction) {
  return str_cat("comm hidden ", static_cast<long long>(std::lround(100.0 * hidden_fraction)), "%");
}

bool reports_exact_match(const DataConfig& data) { return data.source == DataSource::kSynthetic; }

std::string exact_match_text(const DataConfig& data, double accuracy) {
  if (!reports_exact_match(data)) return "";
  return str_cat(", exact-match accuracy ", accuracy * 100, "%");
}

}  // namespace shardwise
