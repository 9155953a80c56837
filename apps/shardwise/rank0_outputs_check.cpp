#include "rank0_outputs_check.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "shardwise/comm/rank_flags.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/fnv1a.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise::cli {
namespace {

// {exists, node, device, inode}: equal on two ranks only for one file on one node.
using FileIdentity = std::array<std::int64_t, 4>;

FileIdentity identity_of(const std::filesystem::path& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return {0, 0, 0, 0};
  std::array<char, 256> host{};
  ::gethostname(host.data(), host.size() - 1);
  Fnv1a node;
  node.text(host.data());
  return {1, static_cast<std::int64_t>(node.value()), static_cast<std::int64_t>(st.st_dev),
          static_cast<std::int64_t>(st.st_ino)};
}

}  // namespace

void check_rank0_outputs_clear_of_configs(ProcessGroup& world, const std::filesystem::path& config,
                                          const std::vector<CommandPath>& outputs) {
  const int ranks = world.size();
  if (ranks == 1) return;
  FileIdentity mine = identity_of(config);
  std::vector<std::int64_t> configs(static_cast<std::size_t>(ranks) * mine.size());
  world
      .all_gather({configs.data(), static_cast<std::int64_t>(configs.size()), DType::kInt64},
                  {mine.data(), static_cast<std::int64_t>(mine.size()), DType::kInt64})
      ->wait();
  // {the rank whose config an output is, that output's index}; -1: none.
  std::array<std::int64_t, 2> clash = {-1, -1};
  if (world.rank() == 0) {
    for (std::size_t i = 0; i < outputs.size() && clash[0] < 0; ++i) {
      const FileIdentity out = identity_of(outputs[i].path);
      for (int r = 1; r < ranks && out[0] != 0; ++r) {
        if (std::equal(out.begin(), out.end(), configs.begin() + r * out.size())) {
          clash = {r, static_cast<std::int64_t>(i)};
          break;
        }
      }
    }
  }
  world.broadcast({clash.data(), 2, DType::kInt64}, 0)->wait();
  if (clash[0] < 0) return;
  // Only rank 0 knows how it named the output (the other ranks may not give the option at all).
  const CommandPath& output = outputs[static_cast<std::size_t>(clash[1])];
  const std::string written = world.rank() == 0
                                  ? str_cat("rank 0's ", output.option, " ", quoted(output.path))
                                  : std::string("an output rank 0 writes");
  throw ConfigError(str_cat(written, " is the file rank ", clash[0], " reads as --config",
                            world.rank() == clash[0] ? str_cat(" ", quoted(config)) : "",
                            ": rank 0 would write over it; give the output another path"));
}

void warn_of_outputs_only_rank0_writes(ProcessGroup& world,
                                       const std::vector<CommandPath>& outputs) {
  for (const CommandPath& output : outputs) {
    const std::string rank0 = broadcast_text(world, output.path.string(), 0);
    if (output.path.string() == rank0) continue;
    log::warning(
        output.option, " ", quoted(output.path), " is not written: only rank 0 writes it",
        rank0.empty() ? std::string(", and rank 0 has none") : str_cat(", to ", quoted(rank0)));
  }
}

}  // namespace shardwise::cli
