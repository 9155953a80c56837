// A fresh temporary directory every rank of a multi-rank test agrees on: rank 0 creates it and
// broadcasts its name.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::test {

inline std::filesystem::path shared_temp_dir(ProcessGroup& world) {
  std::string path(256, '\0');
  if (world.rank() == 0) {
    char templ[] = "/tmp/shardwise-mpi-test-XXXXXX";
    SW_CHECK(::mkdtemp(templ) != nullptr, "mkdtemp failed");
    path.replace(0, std::string(templ).size(), templ);
  }
  world.broadcast(TensorView{path.data(), 256, DType::kUInt8}, 0)->wait();
  return std::filesystem::path(path.c_str());
}

}  // namespace shardwise::test
