// How checkpoint error messages name a file or directory (private to shardwise_checkpoint).
#pragma once

#include <filesystem>
#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise::checkpoint_detail {

// 'PATH', quotes included.
inline std::string quoted(const std::filesystem::path& p) { return str_cat("'", p.string(), "'"); }

}  // namespace shardwise::checkpoint_detail
