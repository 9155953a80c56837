// Will this run fit? An estimate, per rank, of what the trainer allocates - parameters, their
// gradients (the DDP grad buffer), optimizer state and the activations one micro-batch keeps for
// backward - computed from the config alone, so that `model.layers=1000000000` is refused before
// anything is allocated instead of ending in std::bad_alloc (or the OOM killer) minutes later.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "shardwise/config/training_config.hpp"
#include "shardwise/model/gpt_config.hpp"

namespace shardwise {

// Bytes per rank (doubles: absurd configs must not overflow the estimate itself).
struct MemoryEstimate {
  double parameter_count = 0;
  double parameters = 0;
  double gradients = 0;
  double optimizer_state = 0;
  double activations = 0;
  double total() const { return parameters + gradients + optimizer_state + activations; }
};

// fp32 training of `model` at micro-batch `micro_batch` (evaluation batches count too: the
// trainer evaluates up to 64 samples at once); `optimizer_shards` is the data-parallel size the
// optimizer state is sharded over (1 for plain DDP, where every rank keeps all of it).
MemoryEstimate estimate_training_memory(const GptConfig& model, int micro_batch, int eval_samples,
                                        int optimizer_shards);

// MemAvailable from /proc/meminfo in bytes, or nullopt when it cannot be read.
std::optional<double> available_memory_bytes();

// What the memory cgroups this process is in still allow: the least of limit less usage over its
// cgroup and every one above it, v2 (memory.max, memory.current) or v1's memory controller
// (memory.limit_in_bytes, memory.usage_in_bytes); nullopt when none sets a limit. A container's
// limit, which MemAvailable (the host's) does not show. Arguments: where the hierarchy is
// mounted and the process's cgroup list (overridable for tests).
std::optional<double> cgroup_memory_left_bytes(
    const std::filesystem::path& cgroup_root = "/sys/fs/cgroup",
    const std::filesystem::path& self_cgroup = "/proc/self/cgroup");

// What this process may still add to its address space under RLIMIT_AS (`ulimit -v`): the limit
// less the address space in use; nullopt when there is no limit or it cannot be read.
std::optional<double> address_space_left_bytes();

// "1.5 GiB".
std::string format_bytes(double bytes);

// Throws ConfigError with the estimate's parts and the available memory when `ranks_on_host`
// ranks of `estimate` do not fit in `available` bytes (nothing is checked when unknown).
void require_memory_fits(const MemoryEstimate& estimate, int ranks_on_host,
                         std::optional<double> available,
                         std::string_view source = "MemAvailable in /proc/meminfo");

// Throws ConfigError when one rank's `estimate` exceeds `left` bytes of address space (a run
// that fits MemAvailable still ends in std::bad_alloc under a lower `ulimit -v`).
void require_address_space_fits(const MemoryEstimate& estimate, std::optional<double> left);

}  // namespace shardwise
