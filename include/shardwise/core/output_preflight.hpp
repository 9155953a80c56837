// Finding an unusable output path before the work, not after it: a read-only --save directory was
// only noticed at the first save, after all the training. Each check creates a probe file where
// the output will go, writes a few bytes to it and removes it, so a missing directory, a
// read-only mount, a full disk or a path that is a directory fails in milliseconds with an
// IoError naming the path and the option it came from.
#pragma once

#include <filesystem>
#include <string_view>

namespace shardwise {

// `file` will be written (created or replaced): its directory must exist and take a new file,
// and `file` must be a regular file or not exist (a device, FIFO, socket or directory, or a
// symlink to one, is refused).
void preflight_output_file(const std::filesystem::path& file, std::string_view option);

// Files will be written inside `dir`; it is created (with its parents) when missing.
void preflight_output_directory(const std::filesystem::path& dir, std::string_view option);

}  // namespace shardwise
